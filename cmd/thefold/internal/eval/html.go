package eval

import (
	"bytes"
	"fmt"
	"html/template"
	"strings"
)

// The HTML report is one self-contained page: inline CSS, an inline SVG bar chart drawn
// here, no scripts and nothing fetched.

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"dollars": Dollars, "seconds": Seconds, "verdict": verdict, "fraction": fraction,
	"join": strings.Join, "testTime": testTime,
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>TheFold eval — {{.Date}}</title>
<style>
body { font: 15px/1.5 system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; padding: 0 1rem; color: #1b1f24; }
h1 { font-size: 1.6rem; margin-bottom: .5rem; }
.source { padding: .8rem 1rem; border-radius: 6px; border: 2px solid; margin: 1rem 0; }
.source.scripted { background: #fff4e5; border-color: #e8a33d; }
.source.real { background: #e8f4ff; border-color: #3d8be8; }
.headline { font-size: 1.25rem; font-weight: 600; }
table { border-collapse: collapse; width: 100%; margin: 1rem 0; font-variant-numeric: tabular-nums; }
th, td { padding: .3rem .6rem; border-bottom: 1px solid #d8dee4; text-align: right; }
th:nth-child(-n+3), td:nth-child(-n+3) { text-align: left; }
tfoot td { font-weight: 600; border-top: 2px solid #1b1f24; }
.pass { color: #1a7f37; font-weight: 600; }
.fail { color: #cf222e; font-weight: 600; }
pre { background: #f6f8fa; padding: .6rem; overflow-x: auto; font-size: 12px; }
details { margin: .4rem 0; }
svg text { font: 12px system-ui, sans-serif; fill: #1b1f24; }
</style>
</head>
<body>
<h1>TheFold eval — {{.Date}}</h1>
<div class="source {{if .R.Scripted}}scripted{{else}}real{{end}}"><strong>{{.R.SourceLabel}}</strong> {{.R.SourceDetail}}</div>
<p class="headline">{{.T.Passed}} of {{.T.Tasks}} tasks passed their hidden tests.</p>
<p>By language: {{range $i, $l := .T.LanguageOrder}}{{if $i}}, {{end}}{{$l}} {{fraction (index $.T.ByLanguage $l)}}{{end}}.
By kind: {{range $i, $k := .T.KindOrder}}{{if $i}}, {{end}}{{$k}} {{fraction (index $.T.ByKind $k)}}{{end}}.
{{.T.Tasks}} tasks, {{.R.Parallel}} at a time, in {{seconds .R.Elapsed}}.</p>
<p>Each task ran through the whole mesh (task → job → plan → sandboxed build with validation → review gate); its hidden tests
then ran in a fresh sandbox on the review's files, and the review was rejected.</p>
<h2>Time to review per task</h2>
{{.Chart}}
<h2>Results</h2>
<table>
<thead><tr><th>task</th><th>language</th><th>kind</th><th>result</th><th>attempts</th><th>fix rounds</th><th>input tokens</th><th>output tokens</th><th>cost</th><th>wall</th><th>hidden tests</th></tr></thead>
<tbody>
{{range .R.Results}}<tr><td>{{.ID}}</td><td>{{.Language}}</td><td>{{.Kind}}</td><td class="{{if .Passed}}pass{{else}}fail{{end}}">{{verdict .}}</td><td>{{.Attempts}}</td><td>{{.FixRounds}}</td><td>{{.InputTokens}}</td><td>{{.OutputTokens}}</td><td>{{dollars .CostMicros}}</td><td>{{seconds .Wall}}</td><td>{{testTime .}}</td></tr>
{{end}}</tbody>
<tfoot><tr><td>total</td><td></td><td></td><td>{{.T.Passed}}/{{.T.Tasks}}</td><td>{{.T.Attempts}}</td><td>{{.T.FixRounds}}</td><td>{{.T.InputTokens}}</td><td>{{.T.OutputTokens}}</td><td>{{dollars .T.CostMicros}}</td><td>{{seconds .T.Wall}}</td><td>{{seconds .T.TestWall}}</td></tr></tfoot>
</table>
<p>Attempts are the job's attempts (1 when its first build reached review); fix rounds are the builder's rounds of fixing a file
the toolchain rejected, over all attempts; wall is from starting the job to its review; cost is in US dollars at the provider's prices.</p>
<h2>Tasks</h2>
{{range .R.Results}}<details{{if not .Passed}} open{{end}}>
<summary><strong>{{.ID}}</strong> — <span class="{{if .Passed}}pass{{else}}fail{{end}}">{{verdict .}}</span> — {{.Title}}</summary>
{{if .JobID}}<p>Job <code>{{.JobID}}</code> on <code>{{.Repo}}</code>, {{.Where}}.{{if .Models}} Models: {{join .Models ", "}}.{{end}}</p>{{end}}
{{if .Reason}}<p>Why it failed: {{.Reason}}</p>{{end}}
{{if .Files}}<p>Changed: {{range $i, $f := .Files}}{{if $i}}, {{end}}<code>{{$f}}</code>{{end}}</p>{{end}}
{{with .PhaseSummary}}<p>Time by phase: {{.}}.</p>{{end}}
{{if .TestOutput}}<p>Hidden tests' output (tail):</p><pre>{{.TestOutput}}</pre>{{end}}
</details>
{{end}}
</body>
</html>
`))

// HTML renders the report as one self-contained page.
func (r *Report) HTML() (string, error) {
	var b bytes.Buffer
	err := page.Execute(&b, map[string]any{
		"R": r, "T": r.Totals(), "Date": r.Started.UTC().Format("2006-01-02 15:04 UTC"),
		"Chart": template.HTML(r.chart()),
	})
	return b.String(), err
}

// chart draws a horizontal bar per task: its time to review, green when its hidden tests
// passed and red when not, with the figure at the bar's end.
func (r *Report) chart() string {
	const (
		labelW, barW, rowH, pad = 190, 560, 22, 8
		valueW                  = 90
	)
	var maxWall float64
	for _, res := range r.Results {
		maxWall = max(maxWall, res.Wall.Seconds())
	}
	if maxWall == 0 {
		maxWall = 1
	}
	width := labelW + barW + valueW
	height := pad*2 + rowH*len(r.Results) + 20
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="time to review per task">`,
		width, height, width, height)
	b.WriteString("\n")
	for i, res := range r.Results {
		y := pad + i*rowH
		w := int(res.Wall.Seconds() / maxWall * barW)
		if w < 1 {
			w = 1
		}
		color := "#1a7f37"
		if !res.Passed {
			color = "#cf222e"
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`, labelW-8, y+rowH-7, template.HTMLEscapeString(res.ID))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"><title>%s: %s, %s</title></rect>`,
			labelW, y+3, w, rowH-6, color, template.HTMLEscapeString(res.ID), verdict(res), Seconds(res.Wall))
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s %s</text>`+"\n", labelW+w+6, y+rowH-7, Seconds(res.Wall), verdict(res))
	}
	axisY := pad + rowH*len(r.Results) + 4
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#57606a"/>`, labelW, axisY, labelW+barW, axisY)
	fmt.Fprintf(&b, `<text x="%d" y="%d">0</text><text x="%d" y="%d" text-anchor="end">%s</text>`,
		labelW, axisY+14, labelW+barW, axisY+14, Seconds(secondsDuration(maxWall)))
	b.WriteString("\n</svg>")
	return b.String()
}
