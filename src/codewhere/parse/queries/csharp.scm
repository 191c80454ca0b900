(class_declaration name: (identifier) @name) @def.class
(record_declaration name: (identifier) @name) @def.class
(struct_declaration name: (identifier) @name) @def.struct
(interface_declaration name: (identifier) @name) @def.interface
(enum_declaration name: (identifier) @name) @def.enum
(namespace_declaration name: [(identifier) (qualified_name)] @name) @def.module
(method_declaration name: (identifier) @name) @def.method
(constructor_declaration name: (identifier) @name) @def.method
(base_list [(identifier) @base (generic_name (identifier) @base) (qualified_name name: (identifier) @base)]) @inherit
(invocation_expression function: [(identifier) @callee (member_access_expression name: [(identifier) @callee (generic_name (identifier) @callee)]) (generic_name (identifier) @callee)]) @call
(object_creation_expression type: [(identifier) @callee (generic_name (identifier) @callee)]) @call
(using_directive [(identifier) @imported (qualified_name name: (identifier) @imported)]) @import
