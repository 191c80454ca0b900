(class_definition name: (identifier) @name) @def.class
(object_definition name: (identifier) @name) @def.class
(trait_definition name: (identifier) @name) @def.trait
(enum_definition name: (identifier) @name) @def.enum
(function_definition name: (identifier) @name) @def.function
(function_declaration name: (identifier) @name) @def.function
(extends_clause type: [(type_identifier) @base (generic_type type: (type_identifier) @base)]) @inherit
(call_expression function: [(identifier) @callee (field_expression field: (identifier) @callee)]) @call
(import_declaration path: (identifier) @imported .) @import
