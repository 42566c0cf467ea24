// Package idem is the store's idempotence records in Redis: their key
// scheme (org, agent, client token), their value (the state, the
// arguments' fingerprint and the answer) and the scan that deletes the ones
// naming erased entries. The store writes them; forget and purge delete
// them; neither needs the other to do so.
package idem
