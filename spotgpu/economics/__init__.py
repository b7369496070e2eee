"""Cost model, checkpoint interval and trace-driven simulation (no Pulumi import)."""
