module toposched.dev/webhookload

go 1.26.0
