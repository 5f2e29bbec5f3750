// Package jobrun runs durable, long-running jobs (the agent's task loop, the builder's
// builds): a lease store over the service's table of jobs (Leases, Store), a runner that
// holds a job's lease while it runs (Runner), the River queue that delivers runs and the
// reaper that resumes the jobs nobody runs (Queue, on wait.Every like all periodic work).
//
// # How a job runs
//
// A service writes its job row and, in the same transaction, a River job naming it
// (Queue.Enqueue). A River worker calls Runner.Run, which claims the row under a fresh
// token (the service's Claim: it may also change the job's status, as the agent's branch
// lock does), renews the lease every RenewEvery, and runs the job. Every write of the job
// is fenced by the token in the same row lock (Leases.Fence, or the token in the UPDATE's
// WHERE): when the lease is lost — a person paused or cancelled the job, or another worker
// took it over — the write is refused with ErrLeaseLost, and the run's context is
// cancelled at the next renewal. A run that cannot renew for a whole expiry (cut off from
// the database) cancels itself too. When the run ends, however it ends, its lease is
// given back. Every few seconds each replica's reaper takes the jobs whose lease expired
// (TakeStale) and enqueues a new run of each; two reapers never take the same job within
// an expiry.
//
// # Why a lease on top of River
//
// River gives durable at-least-once delivery of a run, inserted in the transaction that
// creates or changes the job, a pool of workers per process, and retries with backoff
// when a run returns an error. It does not give single-writer fencing for a job that runs
// for minutes or hours: River notices a dead worker only through its rescuer, which
// rescues a job still "running" after RescueStuckJobsAfter (an hour by default, and it
// must exceed the job timeout) — and it leaves a job whose worker timeout is negative
// alone, as these jobs' is, since a task or a build runs as long as its budget allows. Even
// when River rescues a job, it cannot stop the original worker: a worker that was only
// partitioned or stalled keeps running and writing beside the retry (River's own
// documentation warns of duplicate execution), and River has no token its writes could be
// fenced by.
//
// The lease gives what River does not: exactly one writer per job (the token fences every
// write of a runner that lost the job), take-over seconds after a worker dies (the expiry
// is seconds, renewed every second, instead of River's hour), and a way for a person's
// pause or cancel on any replica to stop the run at its next renewal. River stays for
// what it does well: the durable, transactional hand-off of "run job X" and the retries of
// a run that failed for a passing reason. A River job is only a request to run: any number
// may name the same job, and only the one that claims the lease runs it.
package jobrun
