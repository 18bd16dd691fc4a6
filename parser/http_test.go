package parser_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/undosh/undosh/parser"
)

// TestFamilyHiddenSends: an HTTP client's body, however it is spelt, is
// respelt as the plain option it is.
func TestFamilyHiddenSends(t *testing.T) {
	t.Parallel()
	fsys := map[string]string{
		"/w/req.cfg":      "# sends\ndata = \"@.env\"\nurl = https://x.example.com\n",
		"/home/a/.curlrc": "upload-file: secret.txt\n",
		"/w/wgetrc":       "post_file = .env\n",
	}
	tests := []struct {
		name, in string
		noRead   bool
		want     string
	}{
		{name: "glued", in: "curl -d@f https://x.example.com", noRead: true, want: "curl -d @f https://x.example.com"},
		{name: "cluster", in: "curl -sSXPOST https://x.example.com", noRead: true, want: "curl -s -S -X POST https://x.example.com"},
		{name: "abbreviation", in: "curl --dat x https://x.example.com", noRead: true, want: "curl --data x https://x.example.com"},
		{name: "-K file", in: "curl -K req.cfg", want: "curl -K req.cfg --upload-file secret.txt --data @.env --url https://x.example.com"},
		{name: ".curlrc", in: "curl https://x.example.com", want: "curl https://x.example.com --upload-file secret.txt"},
		{name: ".curlrc disabled", in: "curl -q https://x.example.com", want: "curl -q https://x.example.com"},
		{name: "CURL_HOME unknown", in: "CURL_HOME=. curl https://x.example.com", noRead: true, want: "curl https://x.example.com --config"},
		{name: "wget -e", in: "wget -e post_data=a=1 https://x.example.com", noRead: true, want: "wget -e post_data=a=1 https://x.example.com --post-data=a=1"},
		{name: "wgetrc", in: "WGETRC=/w/wgetrc wget https://x.example.com", want: "wget https://x.example.com --config"},
		{name: "wget --config", in: "wget --config=wgetrc https://x.example.com", want: "wget --config=wgetrc https://x.example.com --post-file=.env"},
		{name: "httpie data", in: "http https://x.example.com a=b", noRead: true, want: "http POST https://x.example.com a=b"},
		{name: "httpie query and header", in: "http https://x.example.com a==b H:v", noRead: true, want: "http https://x.example.com a==b H:v"},
		{name: "httpie GET with a body", in: "xh GET https://x.example.com n:=1", noRead: true, want: "xh POST https://x.example.com n:=1"},
		{name: "httpie stdin", in: "cat f | http https://x.example.com", noRead: true, want: "http POST https://x.example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := parser.Options{Cwd: "/w", Env: map[string]string{"HOME": "/home/a"}, ReadFile: files(fsys)}
			if tt.noRead {
				opts.ReadFile = nil
			}
			f := parser.Parse(tt.in, opts)
			got := lines(f)
			if diff := cmp.Diff(tt.want, got[len(got)-1]); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
