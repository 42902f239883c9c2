"""HTTP serving shared by the webhook (admission/) and the extender (scheduler/extender/)."""
