(class name: [(constant) @name (scope_resolution name: (constant) @name)]) @def.class
(module name: [(constant) @name (scope_resolution name: (constant) @name)]) @def.module
(method name: (_) @name) @def.method
(singleton_method name: (_) @name) @def.method
(class superclass: (superclass [(constant) @base (scope_resolution name: (constant) @base)])) @inherit
(call method: (identifier) @callee) @call
(call method: (constant) @callee) @call
