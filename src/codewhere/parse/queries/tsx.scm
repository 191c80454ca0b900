(function_declaration name: (identifier) @name) @def.function
(generator_function_declaration name: (identifier) @name) @def.function
(function_signature name: (identifier) @name) @def.function
(class_declaration name: (type_identifier) @name) @def.class
(abstract_class_declaration name: (type_identifier) @name) @def.class
(interface_declaration name: (type_identifier) @name) @def.interface
(enum_declaration name: (identifier) @name) @def.enum
(type_alias_declaration name: (type_identifier) @name) @def.type
(internal_module name: (identifier) @name) @def.module
(method_definition name: [(property_identifier) (private_property_identifier)] @name) @def.method
(method_signature name: (property_identifier) @name) @def.method
(abstract_method_signature name: (property_identifier) @name) @def.method
(lexical_declaration (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression)])) @def.function
(extends_clause value: (identifier) @base) @inherit
(implements_clause (type_identifier) @base) @inherit
(extends_type_clause type: (type_identifier) @base) @inherit
(call_expression function: [(identifier) @callee (member_expression property: (property_identifier) @callee)]) @call
(new_expression constructor: (identifier) @callee) @call
(import_specifier name: (identifier) @imported) @import
(import_clause (identifier) @imported) @import
(expression_statement (assignment_expression left: (member_expression property: (property_identifier) @name) right: [(function_expression) (arrow_function)])) @def.function
(pair key: (property_identifier) @name value: [(function_expression) (arrow_function)]) @def.method
