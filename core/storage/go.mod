module github.com/retain-dev/retain/core/storage

go 1.24
