package testenv

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// concurrentTests is about how many tests of a workspace run keep the
// local PostgreSQL and Redis busy without crowding them: `go test` runs
// GOMAXPROCS test binaries at once (-p), so Main gives each binary
// concurrentTests/GOMAXPROCS parallel tests (and never fewer than Go's
// default, GOMAXPROCS). The servers bound it further, for every suite on
// the machine at once: a test past the 15 Redis databases LeaseRedis hands
// out waits for one, and a test past the database slots fitted to
// PostgreSQL's max_connections (slot.go) waits for one.
const concurrentTests = 16

// Main runs a package's tests; a package whose tests use Postgres or
// LeaseRedis calls it from its TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// The tests spend their time waiting on the servers (commits, queues,
// deadlines), not on the CPU, so Go's default of GOMAXPROCS parallel tests
// leaves a small machine idle: Main raises it (concurrentTests) unless
// -parallel is given. And it lets a test's database be dropped after the
// test, in the background, instead of inside its parallel slot (a DROP
// DATABASE forces a checkpoint): Main waits for the last drop before the
// binary exits, so no database outlives the run.
func Main(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		procs := runtime.GOMAXPROCS(0)
		_ = flag.Set("test.parallel", strconv.Itoa(max(procs, concurrentTests/procs)))
	}
	backgroundDrops.Store(true)
	code := m.Run()
	drops.Wait()
	os.Exit(code)
}

var (
	// backgroundDrops is set by Main: someone waits for drops before exit.
	backgroundDrops atomic.Bool
	drops           sync.WaitGroup
)
