module toposched.dev/webfront

go 1.26.0
