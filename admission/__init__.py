"""The toposched admission webhook (mutating + validating)."""
