(class_declaration name: (identifier) @name) @def.class
(record_declaration name: (identifier) @name) @def.class
(interface_declaration name: (identifier) @name) @def.interface
(enum_declaration name: (identifier) @name) @def.enum
(annotation_type_declaration name: (identifier) @name) @def.interface
(method_declaration name: (identifier) @name) @def.method
(constructor_declaration name: (identifier) @name) @def.method
(superclass (type_identifier) @base) @inherit
(super_interfaces (type_list [(type_identifier) @base (generic_type (type_identifier) @base)])) @inherit
(extends_interfaces (type_list [(type_identifier) @base (generic_type (type_identifier) @base)])) @inherit
(method_invocation name: (identifier) @callee) @call
(object_creation_expression type: [(type_identifier) @callee (generic_type (type_identifier) @callee)]) @call
(import_declaration (scoped_identifier name: (identifier) @imported)) @import
