(class_declaration name: (type_identifier) @name) @def.class
(protocol_declaration name: (type_identifier) @name) @def.interface
(function_declaration name: (simple_identifier) @name) @def.function
(protocol_function_declaration name: (simple_identifier) @name) @def.method
(init_declaration) @def.method
(inheritance_specifier inherits_from: (user_type (type_identifier) @base)) @inherit
(call_expression [(simple_identifier) @callee (navigation_expression suffix: (navigation_suffix suffix: (simple_identifier) @callee))]) @call
(import_declaration (identifier (simple_identifier) @imported .)) @import
