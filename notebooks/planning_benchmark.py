# %% [markdown]
# # planning_benchmark

# %%
print(1)
