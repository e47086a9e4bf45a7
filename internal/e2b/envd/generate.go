package envd

// The generated code is committed; regenerate after editing proto/ with protoc,
// protoc-gen-go and protoc-gen-connect-go on PATH.
//go:generate protoc -I proto -I /usr/include --go_out=gen --go_opt=module=corral/internal/e2b/envd/gen --connect-go_out=gen --connect-go_opt=module=corral/internal/e2b/envd/gen process/process.proto filesystem/filesystem.proto
