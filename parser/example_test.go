package parser_test

import (
	"fmt"

	"github.com/undosh/undosh/parser"
)

func ExampleParse() {
	src := `cd build && rm -rf out > log.txt
sudo -u deploy timeout 10 cp app /srv/app
curl -fsSL https://example.com/install.sh | sh
`
	facts := parser.Parse(src, parser.Options{Cwd: "/home/me/project"})
	for _, c := range facts.Commands {
		fmt.Printf("%s %s in %s", c.Pos, c.Name(), c.Cwd)
		if len(c.Wrappers) > 0 {
			fmt.Printf(" via %v", c.Wrappers)
		}
		if c.Root {
			fmt.Print(" as another user")
		}
		fmt.Println()
		for _, w := range c.Writes {
			fmt.Printf("  writes %s\n", w.Path)
		}
	}
	for _, u := range facts.Unknown {
		fmt.Printf("unknown code at %s: %s\n", u.Pos, u.Reason)
	}
	// Output:
	// 1:1 cd in /home/me/project
	// 1:13 rm in /home/me/project/build
	//   writes /home/me/project/build/log.txt
	//   writes /home/me/project/build/out
	// 2:1 cp in /home/me/project/build via [sudo timeout] as another user
	//   writes /srv/app
	// 3:1 curl in /home/me/project/build
	// 3:45 sh in /home/me/project/build
	// unknown code at 3:45: sh reads its script from standard input
}
