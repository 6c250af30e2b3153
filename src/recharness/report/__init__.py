"""Tables (Markdown, CSV, JSON) and the HTML report."""
