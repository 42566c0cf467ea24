package knowledge_test

import (
	"context"
	"fmt"
	"log"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// Example is an agent's life with the knowledge base: it stores what it
// learnt, finds it again by searching, and when it learns better it stores
// the correction and supersedes the old entry, which search then no longer
// answers.
func Example() {
	ctx := context.Background()
	// A fresh migrated database, as every test of this package gets one
	// (testenv; TEST_DATABASE_URL names the server), dropped at the end.
	d, err := testenv.OpenPostgres(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	// Operators make orgs and agents (ctl org create, ctl agent create);
	// an agent's calls name its org and itself.
	ten := tenancy.New(d.Pool)
	org, err := ten.CreateOrg(ctx, "acme")
	if err != nil {
		log.Fatal(err)
	}
	scout, err := ten.CreateAgent(ctx, org.ID, "scout")
	if err != nil {
		log.Fatal(err)
	}
	agent := knowledge.Caller{OrgID: org.ID, AgentID: scout.ID}

	// The zero Options: the local embedder, no queue (the worker's
	// reconciler finds pending entries), no Redis.
	svc := knowledge.New(d.Pool, knowledge.Options{})

	old, err := svc.Store(ctx, agent, knowledge.StoreInput{
		Title: "Staging deploys need the VPN",
		Body:  "Connect to the office VPN before running the staging deploy script, or it times out.",
		Tags:  []string{"deploy", "staging"},
	})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := svc.Store(ctx, agent, knowledge.StoreInput{
		Title: "Release notes live in the wiki",
		Body:  "Every release gets a page under Releases in the team wiki.",
	}); err != nil {
		log.Fatal(err)
	}
	search := func() {
		res, err := svc.Search(ctx, agent, knowledge.SearchInput{Query: "staging deploy times out"})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d hit(s):\n", len(res.Hits))
		for _, h := range res.Hits {
			fmt.Println(" ", h.Title)
		}
	}
	search()

	// The VPN is gone: store what is true now, and supersede the old entry.
	fix, err := svc.Store(ctx, agent, knowledge.StoreInput{
		Title: "Staging deploys go through the bastion",
		Body:  "The VPN was retired: run the staging deploy script from the bastion host, or it times out.",
		Tags:  []string{"deploy", "staging"},
	})
	if err != nil {
		log.Fatal(err)
	}
	sup, err := svc.Supersede(ctx, agent, old.ID, fix.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("head is the correction:", sup.HeadID == fix.ID)
	search()

	// Output:
	// 1 hit(s):
	//   Staging deploys need the VPN
	// head is the correction: true
	// 1 hit(s):
	//   Staging deploys go through the bastion
}
