(function_definition name: (name) @name) @def.function
(class_declaration name: (name) @name) @def.class
(interface_declaration name: (name) @name) @def.interface
(trait_declaration name: (name) @name) @def.trait
(enum_declaration name: (name) @name) @def.enum
(method_declaration name: (name) @name) @def.method
(base_clause [(name) @base (qualified_name (name) @base .)]) @inherit
(class_interface_clause [(name) @base (qualified_name (name) @base .)]) @inherit
(function_call_expression function: [(name) @callee (qualified_name (name) @callee .)]) @call
(member_call_expression name: (name) @callee) @call
(scoped_call_expression name: (name) @callee) @call
(object_creation_expression [(name) @callee (qualified_name (name) @callee .)]) @call
(namespace_use_clause [(name) @imported (qualified_name (name) @imported .)]) @import
