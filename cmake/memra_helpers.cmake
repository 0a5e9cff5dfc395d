# memra_add_plugin(<target> SOURCES ...): a plugin .so built against sdk/ only,
# staged into the build tree's lib/memra/plugins and installed beside it.
function(memra_add_plugin target)
  cmake_parse_arguments(P "" "OUTPUT_NAME" "SOURCES" ${ARGN})
  add_library(${target} MODULE ${P_SOURCES})
  target_link_libraries(${target} PRIVATE memra::sdk)
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    OUTPUT_NAME "${P_OUTPUT_NAME}"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    LIBRARY_OUTPUT_DIRECTORY "${MEMRA_STAGE_PLUGIN_DIR}")
  install(TARGETS ${target} LIBRARY DESTINATION "${MEMRA_PLUGIN_INSTALL_DIR}")
endfunction()


# Adds every immediate subdirectory of the current source dir that has a CMakeLists.txt,
# so modules can be added without editing their parent.
function(memra_add_subdirectories)
  file(GLOB children RELATIVE "${CMAKE_CURRENT_SOURCE_DIR}" "${CMAKE_CURRENT_SOURCE_DIR}/*")
  list(SORT children)
  foreach(child IN LISTS children)
    if(IS_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}/${child}" AND EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/${child}/CMakeLists.txt")
      add_subdirectory(${child})
    endif()
  endforeach()
endfunction()

# First-party library/executable defaults: project-root includes and warnings.
function(memra_target target)
  target_include_directories(${target} PUBLIC "${MEMRA_SOURCE_ROOT}")
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
endfunction()
