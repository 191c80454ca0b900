(class_declaration name: (identifier) @name) @def.class
(object_declaration name: (identifier) @name) @def.class
(function_declaration name: (identifier) @name) @def.function
(delegation_specifier [(user_type (identifier) @base) (constructor_invocation (user_type (identifier) @base))]) @inherit
(call_expression . [(identifier) @callee (navigation_expression (identifier) @callee .)]) @call
(import (qualified_identifier (identifier) @imported .)) @import
