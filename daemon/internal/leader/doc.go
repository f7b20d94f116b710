// Package leader is a daemon's part in its stack's leader election: the
// Elector holds, renews and contends for the leader lease (a record in the
// backend with an epoch, the fencing token), and Pools and Grants fence
// every grant record a leader writes with the epoch it leads under, so
// that a record written by a daemon that lost the lease is never counted.
//
// docs/ha.md is the user's side of it.
package leader
