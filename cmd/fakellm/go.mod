module github.com/thefold/thefold/cmd/fakellm

go 1.26.0

require github.com/thefold/thefold/pkg v0.0.0

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/sethvargo/go-envconfig v1.4.3 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
)

replace github.com/thefold/thefold/pkg => ../../pkg
