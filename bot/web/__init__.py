"""`codebot web`: the operators' read-only web console (docs/operations.md, "The web console")."""
