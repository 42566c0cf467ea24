package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// isolate-org gives a big org a shard of its own on a Citus cluster
// (packages/knowledge/cluster/isolate.go, docs/scale-out.md "Isolating a big
// tenant"). Citus requires the tables' owner, so it connects as the schema
// owner (OWNER_DATABASE_URL), as migrate does.

type isolateFlags struct {
	orgFlags
	ownerFlags
	mode    string
	timeout time.Duration
}

func (f *isolateFlags) define(fs *flag.FlagSet) {
	f.orgFlags.define(fs)
	f.ownerFlags.define(fs)
	fs.StringVar(&f.mode, "transfer-mode", knowledge.IsolateAuto, "how the org's rows are copied: auto (logical replication, writes go on), block_writes, force_logical")
	fs.DurationVar(&f.timeout, "timeout", time.Hour, "give up (and let Citus clean up the split) after this long")
}

func runIsolateOrg(e *env, f *isolateFlags) error {
	org, err := f.orgID()
	if err != nil {
		return err
	}
	if f.timeout <= 0 {
		return usagef("--timeout must be positive")
	}
	p, err := e.ownerDB(&f.ownerFlags)
	if err != nil {
		return err
	}
	defer p.Close()
	if err := db.CheckSchema(e.ctx, p); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(e.ctx, f.timeout)
	defer cancel()
	m := knowledge.NewMaintenance(knowledge.New(p, knowledge.Options{}), knowledge.MaintenanceConfig{})
	rep, err := m.IsolateOrg(ctx, org, f.mode)
	if err != nil {
		return err
	}
	return e.print(rep, func(w io.Writer) {
		if rep.AlreadyIsolated {
			fmt.Fprintf(w, "org %s already has a shard of its own: %s on %s\n", org, rep.ShardName, rep.Node)
		} else {
			fmt.Fprintf(w, "org %s moved from shard %d to a shard of its own: %s on %s (%.1f s)\n",
				org, rep.FromShard, rep.ShardName, rep.Node, rep.Seconds)
		}
		if len(rep.VectorIndexes) == 0 {
			fmt.Fprintln(w, "vector index of its own: none (Upkeep builds one when the org is large enough)")
		}
		for _, ix := range rep.VectorIndexes {
			fmt.Fprintf(w, "vector index of its own on the new shard: %s (valid)\n", ix.Name)
		}
	})
}
