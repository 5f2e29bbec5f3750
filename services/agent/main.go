// Command agent is TheFold's agent service: it runs tasks as jobs through the task loop
// (context, confidence, complexity, planning, sandbox, build, validation, diagnosis,
// review gate, completion) and serves AgentService and ReviewService. Jobs run as durable
// jobs (River, in the agent schema) and resume after a crash from their last checkpoint.
// ProjectService answers Unimplemented until its own issue lands.
package main

import (
	"github.com/thefold/thefold/pkg/platform"

	"github.com/thefold/thefold/services/agent/internal/app"
)

func main() { platform.Main(app.Service()) }
