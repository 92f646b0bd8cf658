"""Secrets: what of a repo's text is never shown (gitleaks' and detect-secrets' rules, our own,
values in configuration files) and the redactor that applies them to every text a tool returns."""
