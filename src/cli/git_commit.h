// The commit the binary was built from (cmake/git_commit.cmake writes its definition at every
// build): benchmark rows carry it.
#pragma once

namespace memra::cli {
const char* git_commit();
}  // namespace memra::cli
