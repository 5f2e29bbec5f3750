package jobrun

import "github.com/prometheus/client_golang/prometheus"

// claimsTotal counts the runs this process claimed, by kind (RunnerConfig.Noun): with
// several replicas sharing a queue, each one's count says how the work spread.
var claimsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "thefold_runs_claimed_total",
	Help: "Runs of durable work (jobs, builds, projects, replies) this process claimed, by kind.",
}, []string{"kind"})

// running is how many runs this process holds now, by kind.
var running = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "thefold_runs_running",
	Help: "Runs of durable work this process holds now, by kind.",
}, []string{"kind"})

// Register adds the package's metrics to reg: thefold_runs_claimed_total{kind} and
// thefold_runs_running{kind}.
func Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{claimsTotal, running} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
