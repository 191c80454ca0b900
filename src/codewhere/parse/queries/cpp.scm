(function_definition declarator: (function_declarator declarator: [(identifier) @name (field_identifier) @name (destructor_name) @name (qualified_identifier name: [(identifier) (destructor_name) (operator_name)] @name) (operator_name) @name])) @def.function
(function_definition declarator: (pointer_declarator declarator: (function_declarator declarator: [(identifier) @name (qualified_identifier name: (identifier) @name)]))) @def.function
(function_definition declarator: (reference_declarator (function_declarator declarator: [(identifier) @name (qualified_identifier name: (identifier) @name)]))) @def.function
(class_specifier name: [(type_identifier) @name (qualified_identifier name: (type_identifier) @name) (template_type name: (type_identifier) @name)] body: (field_declaration_list)) @def.class
(struct_specifier name: [(type_identifier) @name (qualified_identifier name: (type_identifier) @name) (template_type name: (type_identifier) @name)] body: (field_declaration_list)) @def.struct
(union_specifier name: (type_identifier) @name body: (field_declaration_list)) @def.struct
(enum_specifier name: (type_identifier) @name body: (enumerator_list)) @def.enum
(namespace_definition name: [(namespace_identifier) (nested_namespace_specifier)] @name) @def.module
(base_class_clause [(type_identifier) @base (qualified_identifier name: (type_identifier) @base) (template_type name: (type_identifier) @base)]) @inherit
(call_expression function: [(identifier) @callee (field_expression field: (field_identifier) @callee) (qualified_identifier name: (identifier) @callee) (template_function name: (identifier) @callee)]) @call
(preproc_include path: [(string_literal) (system_lib_string)] @imported) @import
