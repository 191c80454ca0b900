(function_declaration name: (identifier) @name) @def.function
(method_declaration receiver: (parameter_list (parameter_declaration type: [(type_identifier) @receiver (pointer_type (type_identifier) @receiver) (generic_type type: (type_identifier) @receiver) (pointer_type (generic_type type: (type_identifier) @receiver))])) name: (field_identifier) @name) @def.method
(type_spec name: (type_identifier) @name type: (struct_type)) @def.struct
(type_spec name: (type_identifier) @name type: (interface_type)) @def.interface
(struct_type (field_declaration_list (field_declaration . type: [(type_identifier) @base (pointer_type (type_identifier) @base) (qualified_type name: (type_identifier) @base)] .))) @inherit
(call_expression function: [(identifier) @callee (selector_expression field: (field_identifier) @callee)]) @call
(import_spec path: (interpreted_string_literal) @imported) @import
