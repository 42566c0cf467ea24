package erasure

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/idem"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/rediskit"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// Report scans every table of the product's schema and every key of
// Redis the product writes for a text, or for an entry (its id and, while
// it is stored, its title, fragments of its body and the words of it no
// other entry of the org holds), and says where a copy remains (ctl
// erasure-report). It is the proof of an erasure: run before a forget or a
// purge it lists the entry's places; after, Copies is empty.
//
// The tables are read from the catalogue, not from a list, so a table a
// later migration adds is scanned without a change here: every column of
// type text, varchar, char, json, jsonb, tsvector, bytea or uuid (or an
// array of one) of every table of the schema the knowledge table is in,
// the rows of org only where the table has an org_id column, every row
// where it has none. Redis is scanned by the product's key patterns
// (RedisPatterns): the key's name and its value, whatever its type. A text
// is found case-insensitively, and also as JSON writes it (a Redis record,
// a jsonb value); a bytea column as its bytes.
//
// The id of an erased entry stays, by design, where an erasure is
// recorded (the tombstone forget leaves, the audit trail) and where an
// embedding task names it (Redis, asynq's task): such places are Kept,
// with why, not Copies.
//
// The scan stops at the input's Timeout: the report then names what it
// did not reach (NotScanned) and is not Complete. Every statement is one
// org's, read through ctx's org (data.AsOrg).
func (e *Erasure) Report(ctx context.Context, org uuid.UUID, in domain.ErasureReportInput) (_ *domain.ErasureReport, err error) {
	defer data.WrapOp(&err, "knowledge.ErasureReport")
	if err := in.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	rep := &domain.ErasureReport{OrgID: org, Text: in.Text, Copies: []domain.ErasureTrace{}, Kept: []domain.ErasureTrace{}}
	timeout := cmp.Or(in.Timeout, domain.DefaultErasureReportTimeout)
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// cut: the scan's own deadline passed (the caller's context did not
	// end): what is left is named, not an error.
	cut := func(err error) bool { return err != nil && sctx.Err() != nil && ctx.Err() == nil }
	deadline := fmt.Sprintf("the scan's deadline (%s) passed first", timeout)

	if rep.Needles, err = e.needles(sctx, org, in, rep); err != nil {
		if !cut(err) {
			return nil, err
		}
		rep.NotScanned = append(rep.NotScanned, "the entry's words held by no other entry: "+deadline)
	}
	m := newMatcher(rep.Needles)
	if err := e.scanTables(sctx, org, m, rep); err != nil {
		if !cut(err) {
			return nil, err
		}
		rep.NotScanned = append(rep.NotScanned, "the tables from there on: "+deadline)
	}
	switch {
	case sctx.Err() != nil && ctx.Err() == nil:
		rep.NotScanned = append(rep.NotScanned, "redis: "+deadline)
	case e.redis == nil:
		rep.NotScanned = append(rep.NotScanned, "redis: the service has no Redis client")
	default:
		if err := e.scanRedis(sctx, org, m, rep); err != nil {
			if !cut(err) {
				return nil, err
			}
			rep.NotScanned = append(rep.NotScanned, "redis, from the key being read: "+deadline)
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	rep.Complete = len(rep.NotScanned) == 0
	rep.Elapsed = time.Since(start)
	rep.ElapsedMs = rep.Elapsed.Milliseconds()
	return rep, nil
}

// Bounds of what an entry is scanned for.
const (
	// minDerivedChars: a title or fragment shorter than this is in too
	// many places to tell this entry's copy (the text rule's minimum is
	// the operator's choice; derived needles get a margin).
	minDerivedChars = 6
	// bodyFragments fragments of the body, spread over it, each of
	// fragmentWords words and at least fragmentMinChars, at most
	// fragmentMaxChars characters.
	bodyFragments    = 4
	fragmentWords    = 8
	fragmentMinChars = 24
	fragmentMaxChars = 80
	// The entry's words: of at least minWordChars, the wordCandidates
	// longest asked whether another entry holds them, at most entryWords
	// kept.
	minWordChars   = 6
	wordCandidates = 48
	entryWords     = 16
)

// needles is what the report scans for: the text, or the entry's id and,
// when it is stored in org, its title, body fragments and own words.
func (e *Erasure) needles(ctx context.Context, org uuid.UUID, in domain.ErasureReportInput, rep *domain.ErasureReport) ([]domain.ErasureNeedle, error) {
	if in.Text != "" {
		return []domain.ErasureNeedle{{Kind: domain.NeedleText, Text: strings.TrimSpace(in.Text)}}, nil
	}
	rep.Entry = &in.Entry
	out := []domain.ErasureNeedle{{Kind: domain.NeedleID, Text: in.Entry.String()}}
	row, err := e.q.ErasureEntryText(ctx, sqlc.ErasureEntryTextParams{OrgID: org, ID: in.Entry})
	if errors.Is(err, pgx.ErrNoRows) {
		return out, nil // erased, never stored, or another org's: its id alone
	}
	if err != nil {
		return out, err
	}
	rep.EntryStored = true
	add := func(kind, text string) {
		text = strings.TrimSpace(text)
		if utf8.RuneCountInString(text) < minDerivedChars {
			return
		}
		for _, n := range out {
			if strings.EqualFold(n.Text, text) {
				return
			}
		}
		out = append(out, domain.ErasureNeedle{Kind: kind, Text: text})
	}
	add(domain.NeedleTitle, row.Title)
	for _, f := range fragments(row.Body) {
		add(domain.NeedleBody, f)
	}
	words, err := e.q.WordsOnlyInEntry(ctx, sqlc.WordsOnlyInEntryParams{
		Words: candidateWords(row.Title + " " + row.Body + " " + strings.Join(row.Tags, " ")), OrgID: org, ID: in.Entry})
	if err != nil {
		return out, err
	}
	slices.SortFunc(words, longestFirst)
	for _, w := range words[:min(len(words), entryWords)] {
		add(domain.NeedleWord, w)
	}
	return out, nil
}

// fragments cuts up to bodyFragments pieces out of body, spread over it,
// each ending at a word's end: what a copy of the body (a document's
// staged part, a record quoting it) holds verbatim.
func fragments(body string) []string {
	type span struct{ start, end int }
	var words []span
	in := false
	for i, r := range body {
		switch {
		case !unicode.IsSpace(r) && !in:
			words, in = append(words, span{start: i}), true
		case unicode.IsSpace(r) && in:
			words[len(words)-1].end, in = i, false
		}
	}
	if in {
		words[len(words)-1].end = len(body)
	}
	var out []string
	for k := range bodyFragments {
		first := k * len(words) / bodyFragments
		if first >= len(words) {
			break
		}
		var f string
		for j := first; j < len(words) && j < first+fragmentWords; j++ {
			next := body[words[first].start:words[j].end]
			if utf8.RuneCountInString(next) > fragmentMaxChars {
				break
			}
			f = next
		}
		if utf8.RuneCountInString(f) >= fragmentMinChars && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// candidateWords are text's distinct words (letters and digits) of at
// least minWordChars, lowercased, the wordCandidates longest.
func candidateWords(text string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if utf8.RuneCountInString(w) >= minWordChars && !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	slices.SortFunc(out, longestFirst)
	return out[:min(len(out), wordCandidates)]
}

func longestFirst(a, b string) int {
	return cmp.Or(cmp.Compare(utf8.RuneCountInString(b), utf8.RuneCountInString(a)), strings.Compare(a, b))
}

// matcher holds the forms each needle is looked for in: lowercased (text
// and its JSON-escaped writing) for what is compared as text, as given
// and lowercased for bytes.
type matcher struct {
	needles    []domain.ErasureNeedle
	text, byte []string
	textOf     []int // the needle of text[i]
	byteOf     []int // the needle of byte[i]
}

func newMatcher(ns []domain.ErasureNeedle) *matcher {
	m := &matcher{needles: ns}
	addForm := func(forms *[]string, of *[]int, i int, s string) {
		for k, f := range *forms {
			if f == s && (*of)[k] == i {
				return
			}
		}
		*forms, *of = append(*forms, s), append(*of, i)
	}
	for i, n := range ns {
		lower := strings.ToLower(n.Text)
		addForm(&m.text, &m.textOf, i, lower)
		j, _ := json.Marshal(n.Text)
		addForm(&m.text, &m.textOf, i, strings.ToLower(string(j[1:len(j)-1])))
		addForm(&m.byte, &m.byteOf, i, n.Text)
		addForm(&m.byte, &m.byteOf, i, lower)
	}
	return m
}

// kinds names the needles of the matched forms (1-based, as SQL's
// ordinality counts) of forms of.
func (m *matcher) kinds(of []int, matched []int64) []string {
	var out []string
	for _, k := range matched {
		if k < 1 || int(k) > len(of) {
			continue
		}
		if kind := m.needles[of[k-1]].Kind; !slices.Contains(out, kind) {
			out = append(out, kind)
		}
	}
	return out
}

// in lists the needles found in v (its key's name or a value), as their
// kinds; with scope set, only if v holds scope too (an org's id: a key
// that is not one org's by name is the org's where it names it).
func (m *matcher) in(v []byte, into []string, scope []byte) []string {
	lower := bytes.ToLower(v)
	if scope != nil && !bytes.Contains(lower, scope) {
		return into
	}
	for k, f := range m.text {
		if bytes.Contains(lower, []byte(f)) {
			if kind := m.needles[m.textOf[k]].Kind; !slices.Contains(into, kind) {
				into = append(into, kind)
			}
		}
	}
	return into
}

// scanned is a table of the catalogue: its columns to scan.
type scanned struct {
	Name     string
	Readable bool
	ByOrg    bool
	Key      []string
	Columns  []string
	Bytes    []bool // Columns[i] is bytea
}

// tablesSQL lists the tables of the knowledge table's schema (a
// partitioned table once, its partitions through it) with their primary
// key and the columns that can hold text or ids.
const tablesSQL = `
SELECT c.relname::text AS name,
       has_table_privilege(c.oid, 'SELECT') AS readable,
       EXISTS (SELECT 1 FROM pg_attribute a
               WHERE a.attrelid = c.oid AND a.attname = 'org_id' AND NOT a.attisdropped) AS by_org,
       ARRAY(SELECT a.attname::text
             FROM pg_index i, unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord), pg_attribute a
             WHERE i.indrelid = c.oid AND i.indisprimary AND a.attrelid = c.oid AND a.attnum = k.attnum
             ORDER BY k.ord) AS key,
       coalesce(cols.names, '{}') AS columns,
       coalesce(cols.bytes, '{}') AS bytes
FROM pg_class c
LEFT JOIN LATERAL (
  SELECT array_agg(a.attname::text ORDER BY a.attnum) AS names,
         array_agg(coalesce(el.typname, t.typname) = 'bytea' ORDER BY a.attnum) AS bytes
  FROM pg_attribute a
  JOIN pg_type t ON t.oid = a.atttypid
  LEFT JOIN pg_type el ON t.typcategory = 'A' AND el.oid = t.typelem
  WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
    AND coalesce(el.typname, t.typname) IN ('text', 'varchar', 'bpchar', 'json', 'jsonb', 'tsvector', 'bytea', 'uuid')
) cols ON true
WHERE c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = to_regclass('knowledge'))
  AND c.relkind IN ('r', 'p') AND NOT c.relispartition
ORDER BY c.relname`

// keptInTables: the tables that keep an erased entry's id by design.
var keptInTables = map[string]string{
	"knowledge_tombstones": "the tombstone forget leaves: the id, who stored and forgot it, when, the reason",
	"audit_events":         "the audit trail: ids, never content",
}

// codeTables: the tables that hold the product's own text, never an org's,
// and are not scanned (a statement's comments hold common words).
var codeTables = map[string]string{
	"knowledge_org_statements": "the statements the workers run for knowledge_run_org (migration 00047): SQL only",
}

// keptInRedis: the key patterns whose values keep an erased entry's id by
// design.
const keptTask = "an embedding task, queued or kept done: ids only (ctl purge deletes the erased entries' tasks; after a forget the job finds nothing)"

// scanTables scans every table of the schema (tablesSQL) for m's needles.
func (e *Erasure) scanTables(ctx context.Context, org uuid.UUID, m *matcher, rep *domain.ErasureReport) error {
	rows, err := e.data.Scoped().Query(ctx, tablesSQL)
	if err != nil {
		return err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowToStructByPos[scanned])
	if err != nil {
		return err
	}
	if len(tables) == 0 {
		rep.NotScanned = append(rep.NotScanned, "the tables: no table named knowledge in the search path")
	}
	for _, t := range tables {
		switch {
		case len(t.Columns) == 0, codeTables[t.Name] != "":
			continue
		case !t.Readable:
			rep.NotScanned = append(rep.NotScanned, "table "+t.Name+": this role may not read it")
			continue
		}
		if err := e.scanTable(ctx, org, t, m, rep); err != nil {
			if ctx.Err() != nil {
				return err
			}
			rep.NotScanned = append(rep.NotScanned, "table "+t.Name+": "+err.Error())
			continue
		}
		rep.Tables++
		rep.Columns += len(t.Columns)
	}
	return nil
}

// scanTable reads the rows of t (of org, if t has an org_id) holding a
// needle in a column, MaxErasureRows at most, and the needles of each
// column of each.
func (e *Erasure) scanTable(ctx context.Context, org uuid.UUID, t scanned, m *matcher, rep *domain.ErasureReport) error {
	var args []any
	param := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	textP, byteP := "", ""
	forms := func(bytea bool) string {
		if bytea {
			if byteP == "" {
				byteP = param(m.byte)
			}
			return byteP
		}
		if textP == "" {
			textP = param(m.text)
		}
		return textP
	}
	// test is a column's test of one form u.n.
	test := func(col string, bytea bool) string {
		c := "t." + pgx.Identifier{col}.Sanitize()
		if bytea {
			return "position(convert_to(u.n, 'UTF8') IN " + c + ") > 0"
		}
		return "strpos(lower(" + c + "::text), u.n) > 0"
	}
	key := t.Key
	keyExprs := make([]string, 0, len(key)+1)
	for _, k := range key {
		keyExprs = append(keyExprs, "t."+pgx.Identifier{k}.Sanitize()+"::text")
	}
	if len(key) == 0 {
		key, keyExprs = []string{"ctid"}, []string{"t.ctid::text"}
	}
	sel := slices.Clone(keyExprs)
	var tests []string
	for i, col := range t.Columns {
		f := forms(t.Bytes[i])
		sel = append(sel, "ARRAY(SELECT u.i FROM unnest("+f+"::text[]) WITH ORDINALITY AS u(n, i) WHERE "+test(col, t.Bytes[i])+")")
		tests = append(tests, "EXISTS (SELECT 1 FROM unnest("+f+"::text[]) AS u(n) WHERE "+test(col, t.Bytes[i])+")")
	}
	where := "(" + strings.Join(tests, " OR ") + ")"
	if t.ByOrg {
		where = "t.org_id = " + param(org) + " AND " + where
	}
	sql := "SELECT " + strings.Join(sel, ", ") + " FROM " + pgx.Identifier{t.Name}.Sanitize() + " AS t WHERE " + where +
		fmt.Sprintf(" LIMIT %d", domain.MaxErasureRows+1)
	rows, err := e.data.Scoped().Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		if n++; n > domain.MaxErasureRows {
			rep.MoreRows = append(rep.MoreRows, t.Name)
			break
		}
		keys := make([]string, len(key))
		matched := make([][]int64, len(t.Columns))
		dest := make([]any, 0, len(keys)+len(matched))
		for i := range keys {
			dest = append(dest, &keys[i])
		}
		for i := range matched {
			dest = append(dest, &matched[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		row := make([]string, len(key))
		for i, k := range key {
			row[i] = k + "=" + keys[i]
		}
		for i, col := range t.Columns {
			of := m.textOf
			if t.Bytes[i] {
				of = m.byteOf
			}
			found := m.kinds(of, matched[i])
			if len(found) == 0 {
				continue
			}
			tr := domain.ErasureTrace{Table: t.Name, Column: col, Row: strings.Join(row, ", "), Found: found}
			if why, ok := keptInTables[t.Name]; ok && idOnly(found) {
				tr.Kept = why
				rep.Kept = append(rep.Kept, tr)
			} else {
				rep.Copies = append(rep.Copies, tr)
			}
		}
	}
	return rows.Err()
}

// idOnly: of the needles, only the entry's id was found.
func idOnly(found []string) bool { return len(found) == 1 && found[0] == domain.NeedleID }

// RedisPatterns are the key patterns of what the product writes in Redis,
// as an erasure report scans them for org: the org's store idempotence
// records (idem: another org's are not scanned), the knowledge module's
// caches (knowledge:, query vectors: no text), asynq's queues and tasks
// (asynq:, ids only) and the MCP server's rate limits (rate:, the
// redis_rate prefix: counters). A key of the product outside them is a
// gap of the report; TestErasureReportFindsCopiesAndProvesErasure checks
// that every key its store, search and queue make matches one.
func RedisPatterns(org uuid.UUID) []string {
	return []string{idem.Prefix(org, uuid.Nil) + "*", "knowledge:*", asynqPattern, "rate:*"}
}

const asynqPattern = "asynq:*"

// redisPage is how many elements of a hash, list, set, sorted set or
// stream are read at a time.
const redisPage = 1000

// scanRedis scans the keys of RedisPatterns: each key's name and value.
// The org's own keys (its store records, named by it) are read whole; in
// the others (asynq's queues hold every org's tasks) a match counts only
// where the key's name or the element holding it names the org, so
// another org's task naming the same id is not this org's.
func (e *Erasure) scanRedis(ctx context.Context, org uuid.UUID, m *matcher, rep *domain.ErasureReport) error {
	own := idem.Prefix(org, uuid.Nil) + "*"
	orgID := []byte(org.String())
	for _, p := range RedisPatterns(org) {
		err := rediskit.ScanKeys(ctx, e.redis, p, func(ctx context.Context, c redis.Cmdable, key string) error {
			rep.RedisKeys++
			var scope []byte
			if p != own && !strings.Contains(key, org.String()) {
				scope = orgID
			}
			typ, found, err := redisMatches(ctx, c, key, m, scope)
			if u := unreadType(""); errors.As(err, &u) {
				rep.NotScanned = append(rep.NotScanned, "redis key "+key+": "+err.Error())
				err = nil
			}
			if err != nil || len(found) == 0 {
				return err
			}
			tr := domain.ErasureTrace{RedisKey: key, RedisType: typ, Found: found}
			if p == asynqPattern && idOnly(found) {
				tr.Kept = keptTask
				rep.Kept = append(rep.Kept, tr)
			} else {
				rep.Copies = append(rep.Copies, tr)
			}
			return nil
		})
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			rep.NotScanned = append(rep.NotScanned, "redis "+p+": "+err.Error())
		}
	}
	return nil
}

// unreadType is a key of a Redis type the scan does not read (a module's).
type unreadType string

func (t unreadType) Error() string { return "its Redis type " + string(t) + " is not read by the scan" }

// redisMatches reads key (its type's way, page by page) and lists the
// needles its name or value holds.
func redisMatches(ctx context.Context, c redis.Cmdable, key string, m *matcher, scope []byte) (string, []string, error) {
	found := m.in([]byte(key), nil, scope)
	typ, err := c.Type(ctx, key).Result()
	if err != nil {
		return "", nil, err
	}
	scan := func(it *redis.ScanIterator) error {
		for it.Next(ctx) {
			found = m.in([]byte(it.Val()), found, scope)
		}
		return it.Err()
	}
	switch typ {
	case "none": // expired meanwhile
	case "string":
		v, err := c.Get(ctx, key).Bytes()
		if err != nil && !errors.Is(err, redis.Nil) {
			return typ, nil, err
		}
		found = m.in(v, found, scope)
	case "hash":
		err = scan(c.HScan(ctx, key, 0, "", redisPage).Iterator())
	case "set":
		err = scan(c.SScan(ctx, key, 0, "", redisPage).Iterator())
	case "zset":
		err = scan(c.ZScan(ctx, key, 0, "", redisPage).Iterator())
	case "list":
		for i := int64(0); err == nil; i += redisPage {
			var vs []string
			if vs, err = c.LRange(ctx, key, i, i+redisPage-1).Result(); len(vs) == 0 {
				break
			}
			for _, v := range vs {
				found = m.in([]byte(v), found, scope)
			}
		}
	case "stream":
		for from := "-"; err == nil; {
			var msgs []redis.XMessage
			if msgs, err = c.XRangeN(ctx, key, from, "+", redisPage).Result(); len(msgs) == 0 {
				break
			}
			for _, x := range msgs {
				found = m.in([]byte(x.ID), found, scope)
				for f, v := range x.Values {
					found = m.in([]byte(f+"\x00"+fmt.Sprint(v)), found, scope)
				}
			}
			from = "(" + msgs[len(msgs)-1].ID
		}
	default:
		return typ, found, unreadType(typ)
	}
	return typ, found, err
}
