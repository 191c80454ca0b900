(function_item name: (identifier) @name) @def.function
(function_signature_item name: (identifier) @name) @def.function
(struct_item name: (type_identifier) @name) @def.struct
(enum_item name: (type_identifier) @name) @def.enum
(union_item name: (type_identifier) @name) @def.struct
(trait_item name: (type_identifier) @name) @def.trait
(mod_item name: (identifier) @name) @def.module
(macro_definition name: (identifier) @name) @def.function
(impl_item type: [(type_identifier) @name (generic_type type: (type_identifier) @name) (scoped_type_identifier name: (type_identifier) @name)]) @def.impl
(impl_item trait: [(type_identifier) @base (generic_type type: (type_identifier) @base) (scoped_type_identifier name: (type_identifier) @base)]) @inherit
(call_expression function: [(identifier) @callee (field_expression field: (field_identifier) @callee) (scoped_identifier name: (identifier) @callee) (generic_function function: [(identifier) @callee (scoped_identifier name: (identifier) @callee) (field_expression field: (field_identifier) @callee)])]) @call
(macro_invocation macro: (identifier) @callee) @call
(use_declaration argument: [(identifier) @imported (scoped_identifier name: (identifier) @imported) (use_as_clause path: [(identifier) @imported (scoped_identifier name: (identifier) @imported)])]) @import
(use_list [(identifier) @imported (scoped_identifier name: (identifier) @imported)]) @import
