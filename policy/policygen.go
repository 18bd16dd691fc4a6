//go:build policygen

package policy

// GenerateDefault is generateDefault for gen.go, which go generate runs
// with the policygen tag; no build without the tag has it.
func GenerateDefault(src []byte) (code, pos []byte, err error) { return generateDefault(src) }
