package admin

import (
	"embed"
	"html/template"
	"io/fs"
	"net/http"
)

// ui holds the dashboard: one HTML page, its script and stylesheet. They are
// plain files checked into the repository; there is no build step.
//
//go:embed ui
var ui embed.FS

var pageTmpl = template.Must(template.ParseFS(ui, "ui/index.html"))

func (s *Server) handleDashboard(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = pageTmpl.Execute(w, map[string]string{"Server": s.opts.ServerName})
}

func (s *Server) staticHandler() http.Handler {
	sub, err := fs.Sub(ui, "ui")
	if err != nil {
		return http.NotFoundHandler()
	}
	return http.StripPrefix("/ui/", http.FileServerFS(sub))
}
