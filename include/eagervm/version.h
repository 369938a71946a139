/* eagervm's version. The one place it is written: CMake (project VERSION)
 * and the Python package's metadata read it from here. */
#ifndef EAGERVM_VERSION_H
#define EAGERVM_VERSION_H

#define EAGERVM_VERSION_MAJOR 0
#define EAGERVM_VERSION_MINOR 1
#define EAGERVM_VERSION_PATCH 0
#define EAGERVM_VERSION "0.1.0"

#endif
