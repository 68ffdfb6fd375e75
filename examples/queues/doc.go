// Package queues puts held deliveries back on the queues fleets already
// run, at the instant the Breaker names, so that nothing held lives only in
// a worker's memory (one timer per message is lost on restart):
//
//   - asynq (Redis): a new task with asynq.ProcessAt(RetryAt) (asynq.go);
//   - River (PostgreSQL): a job scheduled at RetryAt, inserted in the same
//     transaction that completes the held one (river.go);
//   - a queue that cannot delay (a Redis list here; the same holds for any
//     FIFO): a parking set, a Redis sorted set scored by RetryAt, that a
//     ticker moves back onto the queue when due (parking.go).
//
// Each carries the first hold's instant (Message.HeldSince) in the job's
// payload and passes it to kvbreaker.WithHeldSince on every attempt, so a
// message's HoldLimit counts from its first hold and not from its latest
// requeue: without it a message for a dead host would be requeued forever.
//
// The delivery itself (Deliver) is an HTTP POST through an
// httpbreaker.Transport; the Breaker's decision reaches the queue's handler
// as a *kvbreaker.HeldError.
//
// This module is examples, tested against real servers (redis-server,
// postgres); it is not published, and no module a user imports requires
// asynq or River.
package queues
