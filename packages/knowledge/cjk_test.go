package knowledge_test

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// Chinese, Japanese and Korean text (migration 00013): CJK runs are cut
// into overlapping character bigrams by knowledge_terms, in every org
// whatever its text search configuration; Latin words and identifiers of
// the same text are analysed as before.

type termRow struct {
	tf, len int
}

// analyse returns knowledge_terms of (title, body) under cfg, by field.
func analyse(t *testing.T, pool *pgxpool.Pool, cfg, title, body string) (tt, bb map[string]termRow) {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		"SELECT field::text, term, tf, len FROM knowledge_terms($1::regconfig, $2, $3)", cfg, title, body)
	if err != nil {
		t.Fatal(err)
	}
	tt, bb = map[string]termRow{}, map[string]termRow{}
	for rows.Next() {
		var f, term string
		var r termRow
		if err := rows.Scan(&f, &term, &r.tf, &r.len); err != nil {
			t.Fatal(err)
		}
		if f == "t" {
			tt[term] = r
		} else {
			bb[term] = r
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return tt, bb
}

func TestCJKTermsBigrams(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		name, cfg, text string
		want            map[string]int // term -> tf in field 'b'
		absent          []string
	}{
		{"chinese", "english", "使用连接池可以减少数据库的连接开销",
			map[string]int{"使用": 1, "用连": 1, "连接": 2, "接池": 1, "数据": 1, "据库": 1, "库的": 1, "的连": 1, "接开": 1, "开销": 1},
			[]string{"使用连接池可以减少数据库的连接开销", "数据库", "数"}},
		{"japanese kana and kanji", "english", "東京のデータベースを使用する",
			map[string]int{"東京": 1, "京の": 1, "のデ": 1, "デー": 1, "ータ": 1, "タベ": 1, "ベー": 1, "ース": 1, "スを": 1, "を使": 1, "使用": 1, "用す": 1, "する": 1},
			[]string{"東京のデータベースを使用する", "データベース"}},
		{"korean", "english", "데이터베이스 연결을 확인하세요",
			map[string]int{"데이": 1, "이터": 1, "터베": 1, "베이": 1, "이스": 1, "연결": 1, "결을": 1, "확인": 1, "인하": 1, "하세": 1, "세요": 1},
			[]string{"데이터베이스", "연결을", "스연"}},
		{"a run of one character stays a unigram", "english", "库 and 표",
			map[string]int{"库": 1, "표": 1}, nil},
		{"CJK punctuation cuts runs", "english", "数据库。连接池、配置「テスト」・カタカナ",
			map[string]int{"数据": 1, "据库": 1, "连接": 1, "接池": 1, "配置": 1, "テス": 1, "スト": 1, "カタ": 1, "タカ": 1, "カナ": 1},
			[]string{"库连", "池配", "置テ", "トカ", "。", "、"}},
		{"mixed with Latin and an identifier", "english", "使用 pg_stat_activity 查看连接 connections were pooled",
			map[string]int{"使用": 1, "pg_stat_activity": 1, "activ": 1, "查看": 1, "看连": 1, "连接": 1, "connect": 1, "pool": 1},
			[]string{"connections", "were", "使用 pg_stat_activity"}},
		{"an identifier glued to CJK stays whole", "english", "使用pg_stat_activity查看连接",
			map[string]int{"使用": 1, "pg_stat_activity": 1, "查看": 1, "连接": 1},
			[]string{"使用pg_stat_activity查看连接", "用p", "y查"}},
		{"full-width and half-width forms are normalised", "english", "ＰｏｓｔｇｒｅＳＱＬの設定、ｶﾀｶﾅ",
			map[string]int{"postgresql": 1, "の設": 1, "設定": 1, "カタ": 1, "タカ": 1, "カナ": 1},
			[]string{"ｐｏｓｔｇｒｅｓｑｌ", "ｶﾀ"}},
		{"german stems the Latin words of mixed text", "german", "数据库 Die Datenbanken wurden gesichert",
			map[string]int{"数据": 1, "据库": 1, "datenbank": 1, "gesichert": 1},
			[]string{"die", "datenbanken"}},
		{"simple keeps Latin words as they are", "simple", "数据库 Die Datenbanken",
			map[string]int{"数据": 1, "据库": 1, "die": 1, "datenbanken": 1}, nil},
	}
	for _, c := range cases {
		_, got := analyse(t, b.pool, c.cfg, "", c.text)
		sum := 0
		for _, r := range got {
			sum += r.tf
		}
		for term, tf := range c.want {
			if got[term].tf != tf {
				t.Errorf("%s: term %q: tf %d, want %d (all: %v)", c.name, term, got[term].tf, tf, got)
			}
		}
		for _, term := range c.absent {
			if _, ok := got[term]; ok {
				t.Errorf("%s: term %q must not be there (all: %v)", c.name, term, got)
			}
		}
		// Bigrams count in the length like words do.
		for term, r := range got {
			if r.len != sum {
				t.Errorf("%s: %q has len %d, want the field's total %d", c.name, term, r.len, sum)
			}
		}
	}

	// Title and body: the title's bigrams count in both fields.
	tt, bb := analyse(t, b.pool, "english", "数据库备份", "数据库每天备份")
	if tt["数据"].tf != 1 || bb["数据"].tf != 2 || bb["每天"].tf != 1 || tt["每天"].tf != 0 || tt["数据"].len != 4 || bb["数据"].len != 10 {
		t.Fatalf("title and body: t=%v b=%v", tt, bb)
	}
}

// oldTerms installs, on one connection, the analysis as it was before
// migration 00013 (its Down section brings it back) as
// pg_temp.knowledge_terms_old.
func oldTerms(t *testing.T, conn *pgxpool.Conn) {
	t.Helper()
	src, err := fs.ReadFile(db.Migrations(), "00013_cjk.sql")
	if err != nil {
		t.Fatal(err)
	}
	_, down, ok := strings.Cut(string(src), "-- +goose Down")
	if !ok {
		t.Fatal("00013 has no Down section")
	}
	_, fn, _ := strings.Cut(down, "-- +goose StatementBegin")
	fn, _, _ = strings.Cut(fn, "-- +goose StatementEnd")
	fn = strings.Replace(fn, "FUNCTION knowledge_terms(", "FUNCTION pg_temp.knowledge_terms_old(", 1)
	if _, err := conn.Exec(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

// A text without CJK is analysed exactly as before the migration: the
// postings of such entries stay valid, and purge (which computes an indexed
// entry's terms again) still finds them.
func TestCJKTermsLatinUnchanged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	conn, err := b.pool.Acquire(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	oldTerms(t, conn)
	texts := [][2]string{
		{"Connection pooling", "We pooled the database connections; see pg_stat_activity.state and v1.2.3."},
		{"", "how do I use kafka with net/http and user-id headers"},
		{"Straße café naïve", "Die Datenbanken wurden gesichert. Ελληνικά κείμενα. Русский текст про базы данных."},
		{"Emoji 🚀 and symbols ™ © ½", "Curly “quotes” — dashes – and … ellipsis; ﬁ ligature; ① circled"},
		{"", ""},
	}
	for _, cfg := range []string{"english", "simple", "german"} {
		for _, x := range texts {
			var diff int
			if err := conn.QueryRow(b.ctx, `SELECT count(*) FROM (
				(SELECT * FROM knowledge_terms($1::regconfig, $2, $3) EXCEPT ALL SELECT * FROM pg_temp.knowledge_terms_old($1::regconfig, $2, $3))
				UNION ALL
				(SELECT * FROM pg_temp.knowledge_terms_old($1::regconfig, $2, $3) EXCEPT ALL SELECT * FROM knowledge_terms($1::regconfig, $2, $3))) d`,
				cfg, x[0], x[1]).Scan(&diff); err != nil {
				t.Fatal(err)
			}
			if diff != 0 {
				t.Errorf("%s %q: %d rows differ from the analysis before 00013", cfg, x, diff)
			}
		}
	}
}

// searchCJK runs Service.Search with no score floor and returns the hits
// found by the full-text list and by the title list, each in its list's
// order, with their BM25. Nothing is embedded in these tests, so every hit
// comes from the lexical lists.
func searchCJK(t *testing.T, b *bundle, c knowledge.Caller, q string) (ft, ttl []uuid.UUID, all map[uuid.UUID]knowledge.Hit) {
	t.Helper()
	r, err := b.svc.Search(b.ctx, c, knowledge.SearchInput{Query: q, Limit: new(50), MinScore: ptr(0.0)})
	if err != nil {
		t.Fatalf("search %q: %v", q, err)
	}
	all = map[uuid.UUID]knowledge.Hit{}
	var fts, tts []knowledge.Hit
	for _, h := range r.Hits {
		all[h.ID] = h
		if h.FullTextRank > 0 {
			fts = append(fts, h)
		}
		if h.TitleRank > 0 {
			tts = append(tts, h)
		}
	}
	slices.SortFunc(fts, func(x, y knowledge.Hit) int { return x.FullTextRank - y.FullTextRank })
	slices.SortFunc(tts, func(x, y knowledge.Hit) int { return x.TitleRank - y.TitleRank })
	for _, h := range fts {
		ft = append(ft, h.ID)
	}
	for _, h := range tts {
		ttl = append(ttl, h.ID)
	}
	return ft, ttl, all
}

func bm25(h knowledge.Hit) float64 {
	if h.Signals.BM25 == nil {
		return -1
	}
	return *h.Signals.BM25
}

func titleBM25(h knowledge.Hit) float64 {
	if h.Signals.TitleBM25 == nil {
		return -1
	}
	return *h.Signals.TitleBM25
}

// cjkFiller stores n entries in CJK and Latin that hold none of the test's
// words.
func cjkFiller(t *testing.T, b *bundle, c knowledge.Caller, n int) {
	t.Helper()
	for i := range n {
		b.store(t, c, fmt.Sprintf("日常记录 %d", i), fmt.Sprintf("今天天气很好，没有发生特别的事情。Routine note %d.", i))
	}
}

// checkCJKSearch stores entries in c's org and checks that CJK queries find
// words inside runs, ranked by BM25, in both lexical lists, before and
// after indexing. The Latin word latinQuery must find latinHolder.
func checkCJKSearch(t *testing.T, b *bundle, c knowledge.Caller, latinText, latinQuery string) {
	t.Helper()
	cjkFiller(t, b, c, 6)
	// Full text, query 数据库: the same length, twice against once.
	twice := b.store(t, c, "笔记甲", "数据库和数据库")
	once := b.store(t, c, "笔记乙", "数据库和文件夹")
	// Full text, query 交换机: once each, shorter against longer.
	short := b.store(t, c, "故障一", "交换机故障")
	long := b.store(t, c, "故障二", "交换机故障导致整个机房的网络中断了很长时间")
	// Title, query 备份: shorter title against longer title.
	shortTitle := b.store(t, c, "备份", "每天运行一次。")
	longTitle := b.store(t, c, "备份策略和恢复演练的执行记录", "每周运行一次。")
	without := b.store(t, c, "网络延迟", "网络延迟很高时检查路由器。")
	// Japanese and Korean: a word inside a run.
	ja := b.store(t, c, "設定メモ", "東京のデータベースを使用する")
	ko := b.store(t, c, "점검 메모", "데이터베이스 연결을 확인하세요")
	latin := b.store(t, c, "混合 note", latinText)

	for _, indexed := range []bool{false, true} {
		if indexed {
			b.indexAll(t)
		}
		ft, _, all := searchCJK(t, b, c, "数据库")
		if !slices.Equal(ft, []uuid.UUID{twice, once}) || !(bm25(all[twice]) > bm25(all[once])) {
			t.Fatalf("indexed=%v: 数据库: full text %v, want twice %v then once %v (%v, %v)", indexed, ft, twice, once,
				bm25(all[twice]), bm25(all[once]))
		}
		if _, ok := all[without]; ok {
			t.Fatalf("indexed=%v: an entry without the word was returned", indexed)
		}
		// Length normalisation needs the org's average length: queued
		// entries of an org with no statistics yet are each their own
		// average (docs/knowledge.md), so only the sets are checked then.
		sameSet := func(got, want []uuid.UUID) bool {
			if indexed {
				return slices.Equal(got, want)
			}
			return len(got) == len(want) && !slices.ContainsFunc(want, func(id uuid.UUID) bool { return !slices.Contains(got, id) })
		}
		ft, _, all = searchCJK(t, b, c, "交换机")
		if !sameSet(ft, []uuid.UUID{short, long}) || (indexed && !(bm25(all[short]) > bm25(all[long]))) {
			t.Fatalf("indexed=%v: 交换机: full text %v, want short %v then long %v", indexed, ft, short, long)
		}
		ft, ttl, all := searchCJK(t, b, c, "备份")
		if !sameSet(ttl, []uuid.UUID{shortTitle, longTitle}) || (indexed && !(titleBM25(all[shortTitle]) > titleBM25(all[longTitle]))) {
			t.Fatalf("indexed=%v: 备份: title list %v, want %v then %v", indexed, ttl, shortTitle, longTitle)
		}
		if !sameSet(ft, []uuid.UUID{shortTitle, longTitle}) {
			t.Fatalf("indexed=%v: 备份: full text %v", indexed, ft)
		}
		if _, ok := all[without]; ok {
			t.Fatalf("indexed=%v: 备份: an entry without the word was returned", indexed)
		}
		// A title word inside a longer title.
		if _, ttl, _ := searchCJK(t, b, c, "恢复演练"); !slices.Equal(ttl, []uuid.UUID{longTitle}) {
			t.Fatalf("indexed=%v: 恢复演练: title list %v, want %v", indexed, ttl, longTitle)
		}
		if ft, _, _ := searchCJK(t, b, c, "データベース"); !slices.Contains(ft, ja) {
			t.Fatalf("indexed=%v: データベース: %v, want %v", indexed, ft, ja)
		}
		if ft, _, _ := searchCJK(t, b, c, "연결"); !slices.Equal(ft, []uuid.UUID{ko}) {
			t.Fatalf("indexed=%v: 연결: %v, want %v", indexed, ft, ko)
		}
		if ft, _, _ := searchCJK(t, b, c, "데이터베이스"); !slices.Equal(ft, []uuid.UUID{ko}) {
			t.Fatalf("indexed=%v: 데이터베이스: %v, want %v", indexed, ft, ko)
		}
		// The Latin words of mixed text keep the org's analysis.
		if ft, _, _ := searchCJK(t, b, c, latinQuery); !slices.Equal(ft, []uuid.UUID{latin}) {
			t.Fatalf("indexed=%v: %q: %v, want %v", indexed, latinQuery, ft, latin)
		}
		if ft, _, _ := searchCJK(t, b, c, "pg_stat_activity"); !slices.Equal(ft, []uuid.UUID{latin}) {
			t.Fatalf("indexed=%v: pg_stat_activity: %v, want %v", indexed, ft, latin)
		}
	}
}

func TestCJKSearchFindsWordsInsideRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// english: "connections" is found by "connection" (stemmed).
	checkCJKSearch(t, b, b.alice, "使用pg_stat_activity查看 connections 的数量", "connection")
}

func TestCJKSearchWhateverTheOrgsConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ cfg, text, query string }{
		{"simple", "使用pg_stat_activity查看 Datenbanken 的数量", "datenbanken"},
		{"german", "使用pg_stat_activity查看 Datenbanken 的数量", "Datenbank"},
	} {
		t.Run(c.cfg, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			if _, err := b.ops.Operations().SetTextSearchConfig(b.ctx, b.org, c.cfg); err != nil {
				t.Fatal(err)
			}
			checkCJKSearch(t, b, b.alice, c.text, c.query)
			if st, err := b.ops.Operations().SearchIndexStatus(b.ctx, b.org); err != nil || st.TextSearchConfig != c.cfg {
				t.Fatalf("status %+v %v", st, err)
			}
		})
	}
}

// orgIndex is everything of an org's lexical index but the impacts (which
// depend on when an entry was indexed): its counters, document
// frequencies and postings.
func orgIndex(t *testing.T, pool *pgxpool.Pool, org uuid.UUID) string {
	t.Helper()
	var s string
	if err := pool.QueryRow(context.Background(), `SELECT concat_ws(E'\n',
		(SELECT concat_ws(' ', config, docs, len_b, len_t) FROM knowledge_search_stats WHERE org_id = $1),
		(SELECT string_agg(concat_ws(' ', field, term, df), E'\n' ORDER BY field, term) FROM knowledge_term_stats WHERE org_id = $1),
		(SELECT string_agg(concat_ws(' ', field, term, entry_id, tf, len), E'\n' ORDER BY field, term, entry_id) FROM knowledge_postings WHERE org_id = $1))`,
		org).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// One org's CJK entries never move another org's statistics or scores,
// and an entry of another org is never found.
func TestCJKStatisticsStayPerOrg(t *testing.T) {
	t.Parallel()
	b := setup(t)
	evesA := b.store(t, b.eve, "数据库备份", "数据库每天备份一次。")
	evesB := b.store(t, b.eve, "网络", "交换机和数据库在同一个机房。")
	b.store(t, b.eve, "其他", "今天没有事情。")
	b.indexAll(t)
	before := orgIndex(t, b.pool, b.other)
	scores := func() map[uuid.UUID][2]float64 {
		_, _, all := searchCJK(t, b, b.eve, "数据库备份")
		out := map[uuid.UUID][2]float64{}
		for id, h := range all {
			out[id] = [2]float64{bm25(h), titleBM25(h)}
		}
		return out
	}
	s0 := scores()
	if len(s0) != 2 || s0[evesA][0] <= s0[evesB][0] {
		t.Fatalf("eve's search: %v (want %v above %v)", s0, evesA, evesB)
	}

	// Alice's org fills with the same words, in many entries.
	var alices []uuid.UUID
	for i := range 20 {
		alices = append(alices, b.store(t, b.alice, fmt.Sprintf("数据库备份 %d", i), strings.Repeat("数据库备份。", i+1)))
	}
	cjkFiller(t, b, b.alice, 5)
	for _, indexed := range []bool{false, true} {
		if indexed {
			b.indexAll(t)
		}
		if after := orgIndex(t, b.pool, b.other); after != before {
			t.Fatalf("indexed=%v: eve's index changed:\n%s\n---\n%s", indexed, before, after)
		}
		if s1 := scores(); !maps.Equal(s0, s1) {
			t.Fatalf("indexed=%v: eve's scores changed: %v -> %v", indexed, s0, s1)
		}
	}
	_, _, all := searchCJK(t, b, b.alice, "数据库备份")
	if len(all) != len(alices) {
		t.Fatalf("alice's search found %d entries, want her %d", len(all), len(alices))
	}
	for _, id := range []uuid.UUID{evesA, evesB} {
		if _, ok := all[id]; ok {
			t.Fatalf("alice's search returned eve's %v", id)
		}
	}
	_, err := b.svc.Get(b.ctx, b.eve, alices[0])
	wantCode(t, err, errs.CodeNotFound, "id")
}

// indexAsOf12 indexes every queued entry of org as the indexer did at
// migrations 00012-00013 (packages/knowledge/sql/index_batch.sql then: one
// posting per entry and term, df counts entries, len_b the entry's body
// length), with a constant impact: the code of the module follows the
// latest migration, and the impacts are not compared.
const indexAsOf12 = `
WITH st AS (SELECT s.config FROM knowledge_search_stats s WHERE s.org_id = $1),
batch AS (DELETE FROM knowledge_index_queue q WHERE q.org_id = $1 RETURNING q.entry_id),
terms AS MATERIALIZED (
    SELECT b.entry_id, a.field, a.term, a.tf, a.len
    FROM batch b JOIN knowledge k ON k.org_id = $1 AND k.id = b.entry_id
    CROSS JOIN st CROSS JOIN LATERAL knowledge_terms(st.config, k.title, k.body) AS a (field, term, tf, len)
),
lens AS (
    SELECT entry_id, max(len) FILTER (WHERE field = 'b') AS len_b, coalesce(max(len) FILTER (WHERE field = 't'), 0) AS len_t
    FROM terms GROUP BY entry_id
),
tot AS (SELECT count(*) AS n, coalesce(sum(len_b), 0) AS len_b, coalesce(sum(len_t), 0) AS len_t FROM lens),
ins AS (
    INSERT INTO knowledge_postings (org_id, field, term, impact, entry_id, tf, len)
    SELECT $1, field, term, 1, entry_id, tf, len FROM terms
),
dfs AS (
    INSERT INTO knowledge_term_stats (org_id, field, term, df)
    SELECT $1, field, term, count(*) FROM terms GROUP BY field, term
    ON CONFLICT (org_id, field, term) DO UPDATE SET df = knowledge_term_stats.df + EXCLUDED.df
)
UPDATE knowledge_search_stats s SET docs = s.docs + tot.n, len_b = s.len_b + tot.len_b, len_t = s.len_t + tot.len_t
FROM tot WHERE s.org_id = $1`

// Migration 00013 on a database indexed before it: entries holding CJK
// leave the index (with the analysis they were indexed with) and are
// queued again; the others keep their postings. After indexing, each org's
// index is what a rebuild from scratch gives; the same holds going down
// again. At the latest migration, the module's own indexer and purge then
// keep the statistics those of a rebuild.
func TestCJKMigrationReindexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := testenv.EmptyPostgres(t)
	if err := db.MigrateTo(ctx, d.Pool, 12); err != nil {
		t.Fatal(err)
	}
	type org struct {
		id, agent  uuid.UUID
		cjk, latin []uuid.UUID
	}
	var orgs []*org
	insert := func(o *org, title, body string) uuid.UUID {
		return testfactory.Entry(ctx, t, d.Pool, &testfactory.EntryOpts{OrgID: o.id, AgentID: o.agent, Title: title, Body: body}).ID
	}
	mkOrg := func(name, cfg string) *org {
		a := testfactory.Agent(ctx, t, d.Pool, &testfactory.AgentOpts{OrgID: testfactory.Org(ctx, t, d.Pool, &testfactory.OrgOpts{Name: name}).ID})
		o := &org{id: a.OrgID, agent: a.ID}
		if _, err := d.Pool.Exec(ctx, "INSERT INTO knowledge_search_stats (org_id, config) VALUES ($1, $2::regconfig)", o.id, cfg); err != nil {
			t.Fatal(err)
		}
		orgs = append(orgs, o)
		return o
	}
	for i, cfg := range []string{"english", "simple"} {
		o := mkOrg(fmt.Sprintf("org%d", i), cfg)
		o.cjk = append(o.cjk,
			insert(o, "数据库备份", "使用 pg_stat_activity 查看数据库连接。Connections pooled."),
			insert(o, "Backups", "データベースを使用する"),
			insert(o, "点检", "데이터베이스 연결을 확인하세요"))
		for j := range 5 {
			o.latin = append(o.latin, insert(o, fmt.Sprintf("Connection note %d", j), "The database connections were pooled; see pg_stat_activity."))
		}
	}
	latinOnly := mkOrg("latin", "english")
	latinOnly.latin = append(latinOnly.latin, insert(latinOnly, "Kafka lag", "Consumer lag grows while partitions rebalance."))
	indexAll := func() {
		t.Helper()
		for _, o := range orgs {
			if _, err := d.Pool.Exec(ctx, indexAsOf12, o.id); err != nil {
				t.Fatal(err)
			}
		}
	}
	// rebuilt empties org's index and indexes every entry again.
	rebuilt := func(o *org) string {
		t.Helper()
		for _, q := range []string{
			"DELETE FROM knowledge_postings WHERE org_id = $1",
			"DELETE FROM knowledge_term_stats WHERE org_id = $1",
			"UPDATE knowledge_search_stats SET docs = 0, len_b = 0, len_t = 0 WHERE org_id = $1",
			"INSERT INTO knowledge_index_queue (org_id, entry_id) SELECT org_id, id FROM knowledge WHERE org_id = $1",
			indexAsOf12,
		} {
			if _, err := d.Pool.Exec(ctx, q, o.id); err != nil {
				t.Fatal(err)
			}
		}
		return orgIndex(t, d.Pool, o.id)
	}
	indexAll()
	// An entry queued but not indexed when the migration runs stays queued.
	orgs[0].cjk = append(orgs[0].cjk, insert(orgs[0], "未索引", "数据库迁移"))

	sorted := func(ids []uuid.UUID) []uuid.UUID {
		ids = slices.Clone(ids)
		slices.SortFunc(ids, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
		return ids
	}
	check := func(step string, wantBigrams bool) {
		t.Helper()
		for _, o := range orgs {
			rows, err := d.Pool.Query(ctx, "SELECT entry_id FROM knowledge_index_queue WHERE org_id = $1", o.id)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sorted(got), sorted(o.cjk)) {
				t.Fatalf("%s: queued %v, want the CJK entries %v", step, got, o.cjk)
			}
		}
		indexAll()
		for _, o := range orgs {
			incremental := orgIndex(t, d.Pool, o.id)
			if full := rebuilt(o); incremental != full {
				t.Fatalf("%s: the index after the migration differs from a rebuild:\n%s\n---\n%s", step, incremental, full)
			}
		}
		var n int
		if err := d.Pool.QueryRow(ctx, "SELECT count(*) FROM knowledge_postings WHERE term = '据库'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if wantBigrams != (n > 0) {
			t.Fatalf("%s: %d postings of the bigram 据库", step, n)
		}
	}

	if err := db.MigrateTo(ctx, d.Pool, 13); err != nil {
		t.Fatal(err)
	}
	check("up", true)
	if err := db.MigrateDownTo(ctx, d.Pool, 12); err != nil {
		t.Fatal(err)
	}
	check("down", false)
	if err := db.MigrateTo(ctx, d.Pool, 13); err != nil {
		t.Fatal(err)
	}
	check("up again", true)

	// The latest schema, the module's own indexer and purge.
	if _, err := db.Migrate(ctx, d.Pool); err != nil {
		t.Fatal(err)
	}
	svc := knowledge.New(d.Pool, knowledge.Options{})
	if _, err := maint(svc).IndexAll(ctx); err != nil {
		t.Fatal(err)
	}
	o := orgs[0]
	if _, err := svc.Operations().Purge(ctx, o.id, knowledge.PurgeScope{Entry: o.cjk[0]}, false); err != nil {
		t.Fatal(err)
	}
	after := orgIndex(t, d.Pool, o.id)
	if _, err := svc.Operations().SetTextSearchConfig(ctx, o.id, "english"); err != nil {
		t.Fatal(err)
	}
	if _, err := maint(svc).IndexAll(ctx); err != nil {
		t.Fatal(err)
	}
	if full := orgIndex(t, d.Pool, o.id); after != full {
		t.Fatalf("after a purge: the index differs from a rebuild:\n%s\n---\n%s", after, full)
	}
	r, err := svc.Search(ctx, knowledge.Caller{OrgID: o.id}, knowledge.SearchInput{Query: "数据库", MinScore: ptr(0.0)})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Hits) != 1 || r.Hits[0].ID != o.cjk[3] {
		t.Fatalf("数据库 after the purge: %+v, want %v", r.Hits, o.cjk[3])
	}
}
