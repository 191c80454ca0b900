(function_definition name: (word) @name) @def.function
(command name: (command_name (word) @callee)) @call
