// Command builder is TheFold's builder service: it turns a plan into files in a sandbox,
// phase by phase and file by file in dependency order, validating and fixing each file with
// the real toolchain. Builds run as durable jobs (River, in the builder schema) and resume
// after a crash from their last finished step.
package main

import (
	"github.com/thefold/thefold/pkg/platform"

	"github.com/thefold/thefold/services/builder/internal/app"
)

func main() { platform.Main(app.Service()) }
