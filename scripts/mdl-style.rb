# markdownlint (mdl) rules for scripts/check-docs.sh: everything, except where noted.
all
# Prose lines wrap at 100 columns; tables and code blocks may be wider.
rule 'MD013', :line_length => 100, :ignore_code_blocks => true, :tables => false
# Ordered lists count 1. 2. 3.
rule 'MD029', :style => :ordered
# Lists use '-' bullets.
rule 'MD004', :style => :dash
# Table-heavy pages repeat headings such as "Results" under different parents.
rule 'MD024', :allow_different_nesting => true
# Bold lead-ins ("**Tag mode** costs ...") are emphasis, not headings.
exclude_rule 'MD036'
# Nested lists indent by two spaces.
rule 'MD007', :indent => 2
