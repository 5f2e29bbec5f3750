module github.com/thefold/thefold/cmd/thefold

go 1.26.0

require github.com/thefold/thefold/pkg v0.0.0

replace github.com/thefold/thefold/pkg => ../../pkg
