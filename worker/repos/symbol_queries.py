"""What counts as a definition in each language: tree-sitter tag patterns, written and tested here.

Each pattern captures the defining node as @def and its name as @name, and says its kind. When
two patterns claim the same name node (`const f = () => 1` is a variable and a function), the
one listed first wins, so the specific patterns come before the generic ones. A "function"
whose nearest container is a type (not a namespace or module) is reported as a "method", and a
method named like its type (or `__init__`, `initialize`, `init`, `constructor`, …) as a
"constructor" (worker/repos/symbol_grammars.py).

Kinds: class, interface, trait, struct, union, enum, object, record, protocol, function,
method, constructor, field, property, constant, variable, type, namespace, module, macro.
Containers map a node type to "type" (its functions are methods) or "scope" (a namespace,
module or package: its functions stay functions).
"""

from __future__ import annotations

Patterns = list[tuple[str, str]]

PYTHON: Patterns = [
    ("class", "(class_definition name: (identifier) @name) @def"),
    ("function", "(function_definition name: (identifier) @name) @def"),
    ("variable", "(module (expression_statement (assignment left: (identifier) @name) @def))"),
    (
        "field",
        "(class_definition body: (block (expression_statement (assignment left: (identifier) @name) @def)))",
    ),
]
_JS_COMMON: Patterns = [
    ("function", "(function_declaration name: (identifier) @name) @def"),
    ("function", "(generator_function_declaration name: (identifier) @name) @def"),
    ("class", "(class_declaration name: (_) @name) @def"),
    ("method", "(method_definition name: (_) @name) @def"),
    (
        "function",
        "(variable_declarator name: (identifier) @name"
        " value: [(arrow_function) (function_expression) (generator_function)]) @def",
    ),
    ("class", "(variable_declarator name: (identifier) @name value: (class)) @def"),
    ("variable", "(program (lexical_declaration (variable_declarator name: (identifier) @name) @def))"),
    (
        "variable",
        "(program (export_statement (lexical_declaration (variable_declarator name: (identifier) @name) @def)))",
    ),
    ("variable", "(program (variable_declaration (variable_declarator name: (identifier) @name) @def))"),
    (
        "function",
        "(assignment_expression left: (member_expression property: (property_identifier) @name)"
        " right: [(arrow_function) (function_expression)]) @def",
    ),
    (
        "method",
        "(pair key: (property_identifier) @name value: [(arrow_function) (function_expression)]) @def",
    ),
]
JAVASCRIPT: Patterns = [*_JS_COMMON, ("field", "(field_definition property: (_) @name) @def")]
TYPESCRIPT: Patterns = [
    *_JS_COMMON,
    ("field", "(public_field_definition name: (_) @name) @def"),
    ("interface", "(interface_declaration name: (type_identifier) @name) @def"),
    ("type", "(type_alias_declaration name: (type_identifier) @name) @def"),
    ("enum", "(enum_declaration name: (identifier) @name) @def"),
    ("class", "(abstract_class_declaration name: (type_identifier) @name) @def"),
    ("method", "(method_signature name: (_) @name) @def"),
    ("method", "(abstract_method_signature name: (_) @name) @def"),
    ("function", "(function_signature name: (identifier) @name) @def"),
    ("namespace", "(internal_module name: (_) @name) @def"),
    ("field", "(property_signature name: (_) @name) @def"),
]
GO: Patterns = [
    ("function", "(function_declaration name: (identifier) @name) @def"),
    ("method", "(method_declaration name: (field_identifier) @name) @def"),
    ("struct", "(type_spec name: (type_identifier) @name type: (struct_type)) @def"),
    ("interface", "(type_spec name: (type_identifier) @name type: (interface_type)) @def"),
    ("type", "(type_spec name: (type_identifier) @name) @def"),
    ("type", "(type_alias name: (type_identifier) @name) @def"),
    ("constant", "(source_file (const_declaration (const_spec name: (identifier) @name) @def))"),
    ("variable", "(source_file (var_declaration (var_spec name: (identifier) @name) @def))"),
    ("method", "(method_elem name: (field_identifier) @name) @def"),
    ("field", "(field_declaration name: (field_identifier) @name) @def"),
]
JAVA: Patterns = [
    ("class", "(class_declaration name: (identifier) @name) @def"),
    ("interface", "(interface_declaration name: (identifier) @name) @def"),
    ("interface", "(annotation_type_declaration name: (identifier) @name) @def"),
    ("enum", "(enum_declaration name: (identifier) @name) @def"),
    ("record", "(record_declaration name: (identifier) @name) @def"),
    ("constructor", "(constructor_declaration name: (identifier) @name) @def"),
    ("constructor", "(compact_constructor_declaration name: (identifier) @name) @def"),
    ("method", "(method_declaration name: (identifier) @name) @def"),
    ("method", "(annotation_type_element_declaration name: (identifier) @name) @def"),
    (
        "constant",
        '(field_declaration (modifiers "static" "final") declarator: (variable_declarator name: (identifier) @name)) @def',
    ),
    ("field", "(field_declaration declarator: (variable_declarator name: (identifier) @name)) @def"),
    ("constant", "(constant_declaration declarator: (variable_declarator name: (identifier) @name)) @def"),
    ("constant", "(enum_constant name: (identifier) @name) @def"),
]
KOTLIN: Patterns = [
    ("interface", '(class_declaration "interface" name: (identifier) @name) @def'),
    (
        "enum",
        '(class_declaration (modifiers (class_modifier) @m) name: (identifier) @name (#eq? @m "enum")) @def',
    ),
    ("class", "(class_declaration name: (identifier) @name) @def"),
    ("object", "(object_declaration name: (identifier) @name) @def"),
    ("object", "(companion_object name: (identifier) @name) @def"),
    ("function", "(function_declaration name: (identifier) @name) @def"),
    ("constructor", '(secondary_constructor "constructor" @name) @def'),
    ("type", "(type_alias type: (identifier) @name) @def"),
    (
        "constant",
        "(property_declaration (modifiers (property_modifier) @m)"
        ' (variable_declaration (identifier) @name) (#eq? @m "const")) @def',
    ),
    ("variable", "(source_file (property_declaration (variable_declaration (identifier) @name)) @def)"),
    ("property", "(property_declaration (variable_declaration (identifier) @name)) @def"),
    ("property", '(class_parameter ["val" "var"] (identifier) @name) @def'),
    ("constant", "(enum_entry (identifier) @name) @def"),
]
SCALA: Patterns = [
    ("class", "(class_definition name: (identifier) @name) @def"),
    ("object", "(object_definition name: (identifier) @name) @def"),
    ("trait", "(trait_definition name: (identifier) @name) @def"),
    ("enum", "(enum_definition name: (identifier) @name) @def"),
    ("function", "(function_definition name: (identifier) @name) @def"),
    ("function", "(function_declaration name: (identifier) @name) @def"),
    ("type", "(type_definition name: (type_identifier) @name) @def"),
    ("property", "(val_definition pattern: (identifier) @name) @def"),
    ("property", "(var_definition pattern: (identifier) @name) @def"),
    ("property", "(val_declaration name: (identifier) @name) @def"),
    ("constant", "(simple_enum_case name: (identifier) @name) @def"),
    ("class", "(full_enum_case name: (identifier) @name) @def"),
    ("property", '(class_parameter ["val" "var"] name: (identifier) @name) @def'),
]
CSHARP: Patterns = [
    ("class", "(class_declaration name: (identifier) @name) @def"),
    ("interface", "(interface_declaration name: (identifier) @name) @def"),
    ("struct", "(struct_declaration name: (identifier) @name) @def"),
    ("enum", "(enum_declaration name: (identifier) @name) @def"),
    ("record", "(record_declaration name: (identifier) @name) @def"),
    ("type", "(delegate_declaration name: (identifier) @name) @def"),
    ("namespace", "(namespace_declaration name: (_) @name) @def"),
    ("namespace", "(file_scoped_namespace_declaration name: (_) @name) @def"),
    ("constructor", "(constructor_declaration name: (identifier) @name) @def"),
    ("method", "(method_declaration name: (identifier) @name) @def"),
    ("method", "(local_function_statement name: (identifier) @name) @def"),
    ("property", "(property_declaration name: (identifier) @name) @def"),
    ("property", "(event_declaration name: (identifier) @name) @def"),
    (
        "constant",
        "(field_declaration (modifier) @m (variable_declaration (variable_declarator name: (identifier) @name))"
        ' (#eq? @m "const")) @def',
    ),
    (
        "field",
        "(field_declaration (variable_declaration (variable_declarator name: (identifier) @name))) @def",
    ),
    (
        "field",
        "(event_field_declaration (variable_declaration (variable_declarator name: (identifier) @name))) @def",
    ),
    ("constant", "(enum_member_declaration name: (identifier) @name) @def"),
]
_C_COMMON: Patterns = [
    ("struct", "(struct_specifier name: (type_identifier) @name body: (_)) @def"),
    ("union", "(union_specifier name: (type_identifier) @name body: (_)) @def"),
    ("enum", "(enum_specifier name: (type_identifier) @name body: (_)) @def"),
    ("type", "(type_definition declarator: (type_identifier) @name) @def"),
    (
        "function",
        "(function_definition declarator: (function_declarator declarator: (identifier) @name)) @def",
    ),
    (
        "function",
        "(function_definition declarator: (pointer_declarator declarator:"
        " (function_declarator declarator: (identifier) @name))) @def",
    ),
    ("constant", "(preproc_def name: (identifier) @name value: (_)) @def"),
    ("macro", "(preproc_function_def name: (identifier) @name) @def"),
    ("constant", "(enumerator name: (identifier) @name) @def"),
    ("field", "(field_declaration declarator: (field_identifier) @name) @def"),
    ("field", "(field_declaration declarator: (array_declarator declarator: (field_identifier) @name)) @def"),
    (
        "field",
        "(field_declaration declarator: (pointer_declarator declarator: (field_identifier) @name)) @def",
    ),
]
C: Patterns = [
    *_C_COMMON,
    (
        "variable",
        "(translation_unit (declaration declarator: (init_declarator declarator: (identifier) @name)) @def)",
    ),
]
CPP: Patterns = [
    ("class", "(class_specifier name: (type_identifier) @name body: (_)) @def"),
    *_C_COMMON,
    ("namespace", "(namespace_definition name: (namespace_identifier) @name) @def"),
    ("type", "(alias_declaration name: (type_identifier) @name) @def"),
    (
        "method",
        "(function_definition declarator: (function_declarator declarator:"
        " (qualified_identifier) @name)) @def",
    ),
    (
        "method",
        "(function_definition declarator: (reference_declarator (function_declarator declarator:"
        " (qualified_identifier) @name))) @def",
    ),
    (
        "method",
        "(function_definition declarator: (pointer_declarator declarator: (function_declarator declarator:"
        " (qualified_identifier) @name))) @def",
    ),
    (
        "method",
        "(function_definition declarator: (function_declarator declarator: (field_identifier) @name)) @def",
    ),
    (
        "method",
        "(field_declaration declarator: (function_declarator declarator: (field_identifier) @name)) @def",
    ),
    (
        "constructor",
        "(field_declaration_list (declaration declarator: (function_declarator declarator: (identifier) @name)) @def)",
    ),
    (
        "variable",
        "(translation_unit (declaration declarator: (init_declarator declarator: (identifier) @name)) @def)",
    ),
    (
        "variable",
        "(declaration_list (declaration declarator: (init_declarator declarator: (identifier) @name)) @def)",
    ),
]
RUST: Patterns = [
    ("struct", "(struct_item name: (type_identifier) @name) @def"),
    ("enum", "(enum_item name: (type_identifier) @name) @def"),
    ("union", "(union_item name: (type_identifier) @name) @def"),
    ("trait", "(trait_item name: (type_identifier) @name) @def"),
    ("type", "(type_item name: (type_identifier) @name) @def"),
    ("type", "(associated_type name: (type_identifier) @name) @def"),
    ("function", "(function_item name: (identifier) @name) @def"),
    ("method", "(function_signature_item name: (identifier) @name) @def"),
    ("module", "(mod_item name: (identifier) @name) @def"),
    ("constant", "(const_item name: (identifier) @name) @def"),
    ("variable", "(static_item name: (identifier) @name) @def"),
    ("macro", "(macro_definition name: (identifier) @name) @def"),
    ("field", "(field_declaration name: (field_identifier) @name) @def"),
    ("constant", "(enum_variant name: (identifier) @name) @def"),
]
RUBY: Patterns = [
    ("class", "(class name: [(constant) (scope_resolution name: (_))] @name) @def"),
    ("module", "(module name: [(constant) (scope_resolution name: (_))] @name) @def"),
    ("function", "(method name: (_) @name) @def"),
    ("method", "(singleton_method name: (_) @name) @def"),
    ("constant", "(assignment left: (constant) @name) @def"),
    (
        "property",
        "(call method: (identifier) @m arguments: (argument_list (simple_symbol) @name)"
        ' (#any-of? @m "attr_reader" "attr_writer" "attr_accessor")) @def',
    ),
]
PHP: Patterns = [
    ("class", "(class_declaration name: (name) @name) @def"),
    ("interface", "(interface_declaration name: (name) @name) @def"),
    ("trait", "(trait_declaration name: (name) @name) @def"),
    ("enum", "(enum_declaration name: (name) @name) @def"),
    ("namespace", "(namespace_definition name: (namespace_name) @name body: (_)) @def"),
    ("method", "(method_declaration name: (name) @name) @def"),
    ("function", "(function_definition name: (name) @name) @def"),
    ("constant", "(const_element (name) @name) @def"),
    ("property", "(property_element name: (variable_name (name) @name)) @def"),
    ("property", "(property_promotion_parameter name: (variable_name (name) @name)) @def"),
    ("constant", "(enum_case name: (name) @name) @def"),
]
SWIFT: Patterns = [
    ("struct", '(class_declaration declaration_kind: "struct" name: (type_identifier) @name) @def'),
    ("enum", '(class_declaration declaration_kind: "enum" name: (type_identifier) @name) @def'),
    ("class", "(class_declaration name: (type_identifier) @name) @def"),
    ("protocol", "(protocol_declaration name: (type_identifier) @name) @def"),
    ("function", "(function_declaration name: (simple_identifier) @name) @def"),
    ("method", "(protocol_function_declaration name: (simple_identifier) @name) @def"),
    ("constructor", '(init_declaration "init" @name) @def'),
    ("type", "(typealias_declaration name: (type_identifier) @name) @def"),
    ("type", "(associatedtype_declaration name: (type_identifier) @name) @def"),
    (
        "variable",
        "(source_file (property_declaration name: (pattern bound_identifier: (simple_identifier) @name)) @def)",
    ),
    ("property", "(property_declaration name: (pattern bound_identifier: (simple_identifier) @name)) @def"),
    (
        "property",
        "(protocol_property_declaration name: (pattern bound_identifier: (simple_identifier) @name)) @def",
    ),
    ("constant", "(enum_entry name: (simple_identifier) @name) @def"),
]
BASH: Patterns = [
    ("function", "(function_definition name: (word) @name) @def"),
    ("variable", "(program (variable_assignment name: (variable_name) @name) @def)"),
    ("variable", "(program (declaration_command (variable_assignment name: (variable_name) @name) @def))"),
]
