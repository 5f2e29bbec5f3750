package jobrun

import "github.com/prometheus/client_golang/prometheus"

// claimsTotal counts the runs this process claimed, by kind (RunnerConfig.Noun): with
// several replicas sharing a queue, each one's count says how the work spread.
var claimsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "thefold_runs_claimed_total",
	Help: "Runs of durable work (jobs, builds, projects, replies) this process claimed, by kind.",
}, []string{"kind"})

// Register adds the package's metrics to reg: thefold_runs_claimed_total{kind}.
func Register(reg prometheus.Registerer) error { return reg.Register(claimsTotal) }
