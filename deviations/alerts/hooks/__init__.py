"""What alerts tell beyond email: outgoing webhooks (generic JSON, Slack, Matrix) signed
and retried, "file a bug" links from a family's template, and bisect requests with their
results (docs/alerts.md, "Webhooks, bugs and bisects")."""
