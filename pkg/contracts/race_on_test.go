//go:build race

package contracts

// raceDetector is set when the tests run with the race detector (-race).
const raceDetector = true
