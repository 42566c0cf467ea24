// Package tenancy owns orgs, agents, bearer tokens and quotas: the who and the
// how-much of every call into the knowledge module. Tokens are opaque strings:
// "kn_" followed by the unpadded base64url encoding of the org id, the token
// id and a 32-byte random secret (token.go); only a SHA-256 of the secret is
// stored, and verification is a primary-key look-up plus a constant-time
// compare. Quotas are consumed inside the caller's transaction so a failed
// write consumes nothing.
package tenancy
