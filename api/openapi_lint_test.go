package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/cohort-dev/cohort/internal/testenv"
)

// nodeEnv is the environment of the npm tools: no telemetry or update checks from Redocly.
func nodeEnv() []string {
	return append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_COLOR=1")
}

// redoclyReport is the part of `redocly lint --format json` the test reads.
type redoclyReport struct {
	Totals struct {
		Errors   int `json:"errors"`
		Warnings int `json:"warnings"`
		Ignored  int `json:"ignored"`
	} `json:"totals"`
	Problems []struct {
		RuleID   string `json:"ruleId"`
		Severity string `json:"severity"`
		Message  string `json:"message"`
		Ignored  bool   `json:"ignored"`
		Location []struct {
			Pointer string `json:"pointer"`
			Start   struct {
				Line int `json:"line"`
			} `json:"start"`
		} `json:"location"`
	} `json:"problems"`
}

// TestOpenAPILint runs Redocly's linter (the npm package @redocly/cli, recommended ruleset plus
// api/redocly.yaml, exceptions in api/.redocly.lint-ignore.yaml) on openapi.yaml: no errors;
// warnings are printed.
func TestOpenAPILint(t *testing.T) {
	redocly := filepath.Join(testenv.NodeTools(t), "redocly")
	cmd := exec.Command(redocly, "lint", "--config", "redocly.yaml", "--format", "json", "--max-problems", "1000", "openapi.yaml")
	cmd.Env = nodeEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var rep redoclyReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("redocly lint: %v; output is not its JSON report (%v):\n%s\n%s", runErr, err, stdout.Bytes(), stderr.Bytes())
	}
	for _, p := range rep.Problems {
		if p.Ignored {
			continue
		}
		where := ""
		if len(p.Location) > 0 {
			where = fmt.Sprintf("openapi.yaml:%d %s", p.Location[0].Start.Line, p.Location[0].Pointer)
		}
		if p.Severity == "error" {
			t.Errorf("redocly error %s at %s: %s", p.RuleID, where, p.Message)
		} else {
			t.Logf("redocly %s %s at %s: %s", p.Severity, p.RuleID, where, p.Message)
		}
	}
	t.Logf("redocly lint: %d errors, %d warnings, %d ignored (api/.redocly.lint-ignore.yaml)", rep.Totals.Errors, rep.Totals.Warnings, rep.Totals.Ignored)
	if rep.Totals.Errors != 0 || runErr != nil {
		t.Fatalf("redocly lint failed (%v): %d errors", runErr, rep.Totals.Errors)
	}
}

// clientTS uses the types openapi-typescript generates from openapi.yaml (./schema.d.ts) the way
// a typed client does. The @ts-expect-error lines make sure the types are precise: tsc fails if
// those lines compile, for example when a schema degrades to unknown or any.
const clientTS = `import type { components, operations, paths } from "./schema";

type Schemas = components["schemas"];
export type Event = Schemas["Event"];
export type ApiError = JsonBody<components["responses"]["Error"]>;

/** The JSON body of a response object. */
type JsonBody<R> = R extends { content: { "application/json": infer B } } ? B : never;

export class CohortApiError extends Error {
  constructor(readonly status: number, readonly body: ApiError) {
    super(status + " " + body.error.code + ": " + body.error.message);
  }
}

export interface ClientOptions {
  baseUrl: string;
  authorization: string;
  fetch?: typeof fetch;
}

async function request<T>(o: ClientOptions, method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Authorization: o.authorization };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await (o.fetch ?? fetch)(o.baseUrl + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data: unknown = await res.json();
  if (!res.ok) throw new CohortApiError(res.status, data as ApiError);
  return data as T;
}

type TrackBatch = operations["trackEventsBatch"];
export function trackEventsBatch(
  o: ClientOptions,
  body: TrackBatch["requestBody"]["content"]["application/json"],
): Promise<JsonBody<TrackBatch["responses"][202]>> {
  return request(o, "POST", "/api/ingestion/track/batch/", body);
}

type SegmentItem = paths["/api/segments/{id}/"];
export function getSegment(
  o: ClientOptions,
  id: SegmentItem["parameters"]["path"]["id"],
): Promise<JsonBody<SegmentItem["get"]["responses"][200]>> {
  return request(o, "GET", "/api/segments/" + id + "/");
}

export function computeSegment(
  o: ClientOptions,
  id: operations["computeSegment"]["parameters"]["path"]["id"],
): Promise<JsonBody<operations["computeSegment"]["responses"][202]>> {
  return request(o, "POST", "/api/segments/" + id + "/compute/");
}

type Search = operations["searchProducts"];
export function searchProducts(
  o: ClientOptions,
  query: Search["parameters"]["query"],
): Promise<JsonBody<Search["responses"][200]>> {
  const q = new URLSearchParams({ q: query.q });
  if (query.limit !== undefined) q.set("limit", String(query.limit));
  if (query.segment_id !== undefined) q.set("segment_id", String(query.segment_id));
  return request(o, "GET", "/api/ai-pages/query?" + q.toString());
}

type SegmentBatch = operations["segmentBatch"];
export function segmentBatch(
  o: ClientOptions,
  body: SegmentBatch["requestBody"]["content"]["application/json"],
): Promise<JsonBody<SegmentBatch["responses"][200]>> {
  return request(o, "POST", "/v1/batch", body);
}

export async function example(o: ClientOptions): Promise<string> {
  const events: Event[] = [{ user_id: "u1", event_type: "order_completed", payload: { amount: 12.5 } }];
  const batch = await trackEventsBatch(o, { events });
  const queued: number | undefined = batch.queued;
  const firstError: string | undefined = batch.errors?.[0]?.code;

  const segment = await getSegment(o, 12);
  const status: "draft" | "queued" | "computing" | "ready" | "error" | undefined = segment.status;
  const run = await computeSegment(o, 12);
  const workflow: string | undefined = run.workflow_id;

  const found = await searchProducts(o, { q: "linen dress", limit: 5 });
  const score: number = found.products[0].relevance_score;

  const seg = await segmentBatch(o, { batch: [{ type: "track", event: "Order Completed", userId: "u1" }] });
  const ok: boolean | undefined = seg.success;

  const hero: Schemas["Block"] = { type: "hero", props: { headline: "Summer" } };
  const field: Schemas["ProductSchemaField"] = { name: "color", type: "string", facet: true };
  const schema: Schemas["ProductSchema"] = { fields: [field], default_currency: "EUR" };

  // @ts-expect-error event_type is required
  const noType: Event = { user_id: "u1" };
  // @ts-expect-error a segment id is a number
  await getSegment(o, "12");
  // @ts-expect-error there is no block type carousel
  const carousel: Schemas["Block"] = { type: "carousel", props: { headline: "x" } };
  // @ts-expect-error a product schema field has no type "color"
  const badField: Schemas["ProductSchemaField"] = { name: "c", type: "color" };
  // @ts-expect-error q is required
  await searchProducts(o, { limit: 5 });

  return [queued, firstError, status, workflow, score, ok, hero.type, schema.fields?.length, noType.user_id, carousel.type, badField.name].join(" ");
}
`

// TestOpenAPIClientCompiles generates TypeScript types from openapi.yaml with openapi-typescript
// and compiles a small typed client that uses them with tsc --strict.
func TestOpenAPIClientCompiles(t *testing.T) {
	bin := testenv.NodeTools(t)
	dir := t.TempDir()
	spec, err := filepath.Abs("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gen := exec.Command(filepath.Join(bin, "openapi-typescript"), spec, "--output", filepath.Join(dir, "schema.d.ts"))
	gen.Dir = dir // a redocly.yaml in the working directory would be used as its lint configuration
	gen.Env = nodeEnv()
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("openapi-typescript: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "client.ts"), []byte(clientTS), 0o600); err != nil {
		t.Fatal(err)
	}
	tsc := exec.Command(filepath.Join(bin, "tsc"), "--strict", "--noEmit", "--target", "es2022", "--lib", "es2022,dom",
		"--module", "esnext", "--moduleResolution", "bundler", "client.ts", "schema.d.ts")
	tsc.Dir = dir
	tsc.Env = nodeEnv()
	if out, err := tsc.CombinedOutput(); err != nil {
		t.Fatalf("tsc --strict on the generated client types failed: %v\n%s", err, out)
	}
}

// specOperation is the part of an operation TestOpenAPIOperations reads.
type specOperation struct {
	OperationID string              `yaml:"operationId"`
	Tags        []string            `yaml:"tags"`
	Security    *[]map[string][]any `yaml:"security"`
	RequestBody any                 `yaml:"requestBody"`
	Responses   map[string]any      `yaml:"responses"`
}

var (
	operationIDRE = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)
	// componentRefRE is a $ref to a whole component: never into another schema, path or response.
	componentRefRE = regexp.MustCompile(`^#/components/(schemas|responses|parameters|requestBodies|headers)/[A-Za-z0-9_.-]+$`)
)

// TestOpenAPIOperations: every operation has a unique lowerCamelCase operationId (the ones in
// testdata/operation-ids.txt, so generated method names do not change unnoticed) and a tag the
// document defines; it lists the 4xx answers it can give (401 and 403 when it takes credentials,
// 400 and 413 when it takes a body, 404 when its path names a resource); and every $ref names a
// whole component.
func TestOpenAPIOperations(t *testing.T) {
	raw := OpenAPISpec()
	var doc struct {
		Tags []struct {
			Name string `yaml:"name"`
		} `yaml:"tags"`
		Paths map[string]map[string]yaml.Node `yaml:"paths"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, tg := range doc.Tags {
		tags = append(tags, tg.Name)
	}

	var got []string // "operationId METHOD path"
	ids := map[string]string{}
	for path, item := range doc.Paths {
		for method, n := range item {
			if !slices.Contains(openAPIMethods, method) {
				continue
			}
			key := strings.ToUpper(method) + " " + path
			var op specOperation
			if err := n.Decode(&op); err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			got = append(got, op.OperationID+" "+key)
			switch {
			case !operationIDRE.MatchString(op.OperationID):
				t.Errorf("%s: operationId %q is not lowerCamelCase", key, op.OperationID)
			case ids[op.OperationID] != "":
				t.Errorf("%s: operationId %q is already used by %s", key, op.OperationID, ids[op.OperationID])
			}
			ids[op.OperationID] = key
			if len(op.Tags) == 0 {
				t.Errorf("%s: no tags", key)
			}
			for _, tg := range op.Tags {
				if !slices.Contains(tags, tg) {
					t.Errorf("%s: tag %q is not in the document's tags", key, tg)
				}
			}
			var want []string
			if op.Security == nil || len(*op.Security) > 0 { // nil: the document's default (Bearer)
				want = append(want, "401", "403")
			}
			if op.RequestBody != nil {
				want = append(want, "400", "413") // every body is capped (COHORT_MAX_BODY_BYTES or the route's own limit)
			}
			if strings.Contains(path, "{") {
				want = append(want, "404")
			}
			for _, code := range want {
				if _, ok := op.Responses[code]; !ok {
					t.Errorf("%s: does not list %s", key, code)
				}
			}
		}
	}

	t.Run("stable operationIds", func(t *testing.T) {
		f, err := os.Open(filepath.Join("testdata", "operation-ids.txt"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var pinned []string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
				pinned = append(pinned, line)
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		sort.Strings(got)
		sort.Strings(pinned)
		for _, p := range pinned {
			if !slices.Contains(got, p) {
				t.Errorf("testdata/operation-ids.txt has %q, which openapi.yaml no longer has: a renamed operationId renames generated clients' methods", p)
			}
		}
		for _, g := range got {
			if !slices.Contains(pinned, g) {
				t.Errorf("openapi.yaml has %q: add it to testdata/operation-ids.txt", g)
			}
		}
	})

	t.Run("refs name whole components", func(t *testing.T) {
		var walk func(n *yaml.Node)
		walk = func(n *yaml.Node) {
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if k, v := n.Content[i], n.Content[i+1]; k.Value == "$ref" && !componentRefRE.MatchString(v.Value) {
						t.Errorf("openapi.yaml:%d: $ref %q points inside another object; name the part as a component", v.Line, v.Value)
					}
				}
			}
			for _, c := range n.Content {
				walk(c)
			}
		}
		var root yaml.Node
		if err := yaml.Unmarshal(raw, &root); err != nil {
			t.Fatal(err)
		}
		walk(&root)
	})
}
