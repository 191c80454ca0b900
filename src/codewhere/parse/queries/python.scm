(class_definition name: (identifier) @name) @def.class
(function_definition name: (identifier) @name) @def.function
(class_definition superclasses: (argument_list [(identifier) @base (attribute attribute: (identifier) @base)])) @inherit
(call function: [(identifier) @callee (attribute attribute: (identifier) @callee)]) @call
(import_statement name: [(dotted_name (identifier) @imported .) (aliased_import name: (dotted_name (identifier) @imported .))]) @import
(import_from_statement name: [(dotted_name (identifier) @imported .) (aliased_import name: (dotted_name (identifier) @imported .))]) @import
